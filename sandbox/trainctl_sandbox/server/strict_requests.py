"""The sandbox refuses what AWS refuses: every request is checked on the server against its botocore model.

botocore checks types and required members on the client, but not the constraints that AWS enforces on
the server: string lengths, patterns and enums, list and map sizes, numeric ranges. Without this check a
66-character IAM role name or an over-long training job name passes the sandbox and fails on AWS. EC2
filter names are checked against the names the operation documents (botocore's `Filters` documentation),
because EC2 answers an unknown filter name with an error.

The request is read back from the wire into botocore's parameter shape (`wire_params`), generically for the
ec2, query and json protocols and for the URI, query string and header members of the REST protocols;
`problems` then walks the operation's input shape. The error is worded as AWS words it (`error_for`).
Only botocore and the standard library are imported.
"""
from __future__ import annotations

import functools
import json
import re
from typing import Any
from urllib.parse import parse_qsl, unquote

_MISSING = object()


@functools.lru_cache(maxsize=None)
def _service_model(service: str):
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


def operation_model(service: str, operation: str):
    """The botocore operation model, or None for an operation the model does not know."""
    try:
        return _service_model(service).operation_model(operation)
    except Exception:  # noqa: BLE001 - unknown service or operation: nothing to check against
        return None


# ----------------------------------------------------------------------------- wire -> params
def _query_name(name: str, shape, protocol: str) -> str:
    ser = shape.serialization
    if protocol == "ec2":
        if ser.get("queryName"):
            return ser["queryName"]
        if ser.get("name"):
            return ser["name"][0].upper() + ser["name"][1:]
        return name
    return ser.get("name", name)


def _has_prefix(keys: dict, prefix: str) -> bool:
    return prefix in keys or any(k.startswith(prefix + ".") for k in keys)


def _from_query(shape, keys: dict[str, str], prefix: str, protocol: str) -> Any:
    kind = shape.type_name
    if kind == "structure":
        out = {}
        for name, member in shape.members.items():
            key = _query_name(name, member, protocol)
            value = _from_query(member, keys, f"{prefix}.{key}" if prefix else key, protocol)
            if value is not _MISSING:
                out[name] = value
        return out if out or not prefix else _MISSING
    if kind == "list":
        flattened = protocol == "ec2" or shape.serialization.get("flattened")
        base = prefix if flattened else f"{prefix}.{shape.member.serialization.get('name', 'member')}"
        items, i = [], 1
        while _has_prefix(keys, f"{base}.{i}"):
            items.append(_from_query(shape.member, keys, f"{base}.{i}", protocol))
            i += 1
        return items if items or prefix in keys else _MISSING
    if kind == "map":
        base = prefix if shape.serialization.get("flattened") else f"{prefix}.entry"
        key_name = shape.key.serialization.get("name", "key")
        value_name = shape.value.serialization.get("name", "value")
        out, i = {}, 1
        while _has_prefix(keys, f"{base}.{i}"):
            out[keys.get(f"{base}.{i}.{key_name}", "")] = _from_query(shape.value, keys, f"{base}.{i}.{value_name}",
                                                                      protocol)
            i += 1
        return out if out else _MISSING
    if prefix not in keys:
        return _MISSING
    return _scalar(shape, keys[prefix])


def _scalar(shape, text: str) -> Any:
    kind = shape.type_name
    try:
        if kind in ("integer", "long"):
            return int(text)
        if kind in ("float", "double"):
            return float(text)
    except ValueError:
        return text  # a malformed number: the service's own parser rejects it
    if kind == "boolean":
        return text.lower() == "true" if text.lower() in ("true", "false") else text
    return text


def _from_json(shape, value: Any) -> Any:
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        out = {}
        for name, member in shape.members.items():
            key = member.serialization.get("name", name)
            if key in value:
                out[name] = _from_json(member, value[key])
        return out
    if kind == "list" and isinstance(value, list):
        return [_from_json(shape.member, v) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: _from_json(shape.value, v) for k, v in value.items()}
    return value


def _uri_params(request_uri: str, path: str) -> dict[str, str]:
    """Values of {Label} and {Label+} in the operation's URI template, read from the request path."""
    template = request_uri.split("?", 1)[0]
    pattern = re.escape(template)
    for label in re.findall(r"\{([^}]+)\}", template):
        greedy = label.endswith("+")
        name = label.rstrip("+")
        pattern = pattern.replace(re.escape("{" + label + "}"), f"(?P<{name}>{'.+' if greedy else '[^/]+'})")
    m = re.fullmatch(pattern, path)
    return {k: unquote(v) for k, v in m.groupdict().items()} if m else {}


def wire_params(op, protocol: str, body: bytes, query_string: str = "", path: str = "/",
                headers: dict[str, str] | None = None) -> dict:
    """The request's parameters as botocore's input shape names them (what the client passed to boto3)."""
    shape = op.input_shape
    if shape is None:
        return {}
    if protocol in ("ec2", "query"):
        keys = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        keys.update(parse_qsl(query_string, keep_blank_values=True))
        params = _from_query(shape, keys, "", protocol)
        return params if isinstance(params, dict) else {}
    if protocol == "json":
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return {}
        return _from_json(shape, data) if isinstance(data, dict) else {}
    return _rest_params(op, protocol, body, query_string, path, headers or {})


def _rest_params(op, protocol, body, query_string, path, headers) -> dict:
    shape, out = op.input_shape, {}
    uri = _uri_params(op.http.get("requestUri", "/"), path)
    query = dict(parse_qsl(query_string, keep_blank_values=True))
    lower_headers = {k.lower(): v for k, v in headers.items()}
    body_members = {}
    for name, member in shape.members.items():
        where, wire_name = member.serialization.get("location"), member.serialization.get("name", name)
        if where == "uri" and wire_name in uri:
            out[name] = _scalar(member, uri[wire_name])
        elif where == "querystring" and wire_name in query:
            out[name] = _scalar(member, query[wire_name])
        elif where == "header" and wire_name.lower() in lower_headers:
            out[name] = _scalar(member, lower_headers[wire_name.lower()])
        elif where is None:
            body_members[name] = member
    if protocol == "rest-json" and body_members and body:
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict):
            for name, member in body_members.items():
                key = member.serialization.get("name", name)
                if key in data:
                    out[name] = _from_json(member, data[key])
    return out  # rest-xml bodies (S3) are not read back: their members carry no server-side constraints we use


# ----------------------------------------------------------------------------- constraints
def _lower_camel(name: str) -> str:
    return name[:1].lower() + name[1:]


@functools.lru_cache(maxsize=4096)
def _regex(pattern: str):
    try:
        return re.compile(pattern)
    except re.error:
        return None  # a Java-only construct (\p{...}): not checkable here; AWS still checks it


def _shown(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 100 else text[:97] + "..."


def problems(shape, value: Any, at: str = "") -> list[str]:
    """AWS's wording of every constraint the value breaks ('Value 'x' at 'a.b' failed to satisfy ...')."""
    out: list[str] = []
    kind, meta = shape.type_name, shape.metadata
    where = f" at '{at}'" if at else ""
    if kind == "structure" and isinstance(value, dict):
        for name, member in shape.members.items():
            if name in value:
                out += problems(member, value[name], f"{at}.{_lower_camel(name)}" if at else _lower_camel(name))
        return out
    if kind == "list" and isinstance(value, list):
        out += _size(value, meta, where, "length")
        for i, item in enumerate(value, 1):
            out += problems(shape.member, item, f"{at}.{i}.member" if at else f"{i}.member")
        return out
    if kind == "map" and isinstance(value, dict):
        out += _size(value, meta, where, "length")
        for k, v in value.items():
            out += problems(shape.key, k, f"{at}.key")
            out += problems(shape.value, v, f"{at}.{k}")
        return out
    if kind == "string" and isinstance(value, str):
        out += _size(value, meta, where, "length", shown=value)
        rx = _regex(meta["pattern"]) if "pattern" in meta else None
        if rx is not None and not rx.fullmatch(value):
            out.append(f"Value '{_shown(value)}'{where} failed to satisfy constraint: Member must satisfy regular "
                       f"expression pattern: {meta['pattern']}")
        if shape.enum and value not in shape.enum:
            out.append(f"Value '{_shown(value)}'{where} failed to satisfy constraint: Member must satisfy enum value "
                       f"set: [{', '.join(shape.enum)}]")
        return out
    if kind in ("integer", "long", "float", "double") and isinstance(value, (int, float)) \
            and not isinstance(value, bool):
        out += _bounds(value, meta, f"Value '{value}'{where}", "value")
    return out


def _size(value, meta: dict, where: str, word: str, shown: Any = None) -> list[str]:
    label = f"Value '{_shown(shown)}'" if shown is not None else "Value"
    return _bounds(len(value), meta, f"{label}{where}", word)


def _bounds(n: float, meta: dict, label: str, what: str) -> list[str]:
    """AWS's words for a number (a value, or a length) outside the shape's min/max."""
    out = []
    if "min" in meta and n < meta["min"]:
        out.append(f"{label} failed to satisfy constraint: Member must have {what} greater than or equal to "
                   f"{meta['min']}")
    if "max" in meta and n > meta["max"]:
        out.append(f"{label} failed to satisfy constraint: Member must have {what} less than or equal to "
                   f"{meta['max']}")
    return out


# ----------------------------------------------------------------------------- EC2 filter names
_FIRST_CODE = re.compile(r"<li>\s*<p>\s*<code>([^<]+)</code>")
_ALSO = re.compile(r"also use (.*?) as the filter name", re.S)


@functools.lru_cache(maxsize=1024)
def documented_filters(service: str, operation: str) -> frozenset[str] | None:
    """The filter names an operation documents (None: it documents none, so none can be checked)."""
    op = operation_model(service, operation)
    member = op.input_shape.members.get("Filters") if op is not None and op.input_shape is not None else None
    doc = getattr(member, "documentation", "") or ""
    names = {unescape_html(n).strip() for n in _FIRST_CODE.findall(doc)}
    for sentence in _ALSO.findall(doc):
        names.update(unescape_html(n).strip() for n in re.findall(r"<code>([^<]+)</code>", sentence))
    return frozenset(names) if names else None


def unescape_html(text: str) -> str:
    import html

    return html.unescape(text)


def filter_problems(service: str, operation: str, params: dict) -> list[str]:
    allowed = documented_filters(service, operation)
    if allowed is None:
        return []
    # documented as `tag:<key>` or as `<code>tag</code>:<key>`: any tag key is a valid name
    tag_filter = "tag" in allowed or any(a.startswith("tag:") for a in allowed)
    out = []
    for f in params.get("Filters") or []:
        name = f.get("Name", "") if isinstance(f, dict) else ""
        if name in allowed or (tag_filter and name.startswith("tag:") and len(name) > 4):
            continue
        out.append(f"The filter '{name}' is invalid")
    return out


# ----------------------------------------------------------------------------- the answer
def check(service: str, operation: str, protocol: str, body: bytes, query_string: str = "", path: str = "/",
          headers: dict[str, str] | None = None) -> tuple[str, str] | None:
    """(AWS error code, message) when the request breaks its model's constraints, else None."""
    op = operation_model(service, operation)
    if op is None or op.input_shape is None:
        return None
    params = wire_params(op, protocol, body, query_string, path, headers)
    bad_filters = filter_problems(service, operation, params) if protocol == "ec2" else []
    if bad_filters:
        return "InvalidParameterValue", bad_filters[0]
    found = problems(op.input_shape, params) + documented_value_problems(service, operation, params)
    if service == "ec2" and not found:
        found = user_data_problems(operation, params)
    if not found:
        return None
    return error_for(protocol, found)


# Values a member's documentation enumerates where the model has no `enum`: CloudWatch Logs `Days` ("Possible
# values are: 1, 3, 5, ..."); AWS answers InvalidParameterException for any other.
DOCUMENTED_VALUES = {("logs", "PutRetentionPolicy", "retentionInDays"): (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)}


def documented_value_problems(service: str, operation: str, params: dict) -> list[str]:
    out = []
    for (svc, op, member), allowed in DOCUMENTED_VALUES.items():
        if (svc, op) == (service, operation) and member in params and params[member] not in allowed:
            out.append(f"Value '{params[member]}' at '{member}' failed to satisfy constraint: Member must satisfy "
                       f"enum value set: [{', '.join(map(str, allowed))}]")
    return out


# EC2 User Guide, "Instance user data": "user data is limited to 16 KB, in raw form, before it is base64-encoded".
USER_DATA_LIMIT = 16 * 1024


def user_data_problems(operation: str, params: dict) -> list[str]:
    """EC2 refuses user data over 16 KB (decoded) in a launch template or RunInstances."""
    import base64
    import binascii

    if operation in ("CreateLaunchTemplate", "CreateLaunchTemplateVersion"):
        params = params.get("LaunchTemplateData") or {}
    elif operation != "RunInstances":
        return []
    text = params.get("UserData")
    if not isinstance(text, str):
        return []
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return []  # not base64: other checks' business
    if len(raw) > USER_DATA_LIMIT:
        return [f"User data is limited to {USER_DATA_LIMIT} bytes (this is {len(raw)} bytes before base64)"]
    return []


def error_for(protocol: str, found: list[str]) -> tuple[str, str]:
    n = len(found)
    message = f"{n} validation error{'s' if n > 1 else ''} detected: " + "; ".join(found)
    code = {"ec2": "InvalidParameterValue", "query": "ValidationError", "rest-xml": "InvalidArgument"}.get(
        protocol, "ValidationException")
    return code, message

"""A small IAM policy evaluator over the statements trainctl generates, for tests.

No maintained PyPI library evaluates identity policies with conditions offline (parliament and cloudsplaining
lint; policyuniverse parses), so this follows AWS's documented evaluation logic for one account
("Policy evaluation logic", IAM User Guide), restricted to what trainctl's documents use:
- an explicit Deny in any policy wins; otherwise some identity-policy statement must Allow, and when the
  principal has a permissions boundary, some boundary statement must Allow too;
- Action / NotAction with `*` and `?` wildcards, case-insensitive; Resource / NotResource with wildcards,
  case-sensitive;
- policy variables `${aws:...}` / `${s3:...}` in Resource and condition values, filled from the request context;
- condition operators StringEquals, StringNotEquals, StringLike, StringNotLike, ArnLike, ArnEquals,
  ArnNotEquals, ArnNotLike, Bool, Null, the `...IfExists` suffix and the `ForAllValues:` / `ForAnyValue:`
  set prefixes. Keys within one operator are ANDed, the values of one key ORed; a missing key fails a
  positive operator and passes a negated one. An operator this module does not know raises, so a policy
  using it cannot pass by accident.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

VARIABLE = re.compile(r"\$\{([A-Za-z0-9:/_.-]+)\}")


@dataclass
class Request:
    action: str
    resource: str
    context: dict[str, Any] = field(default_factory=dict)   # condition keys (any case) -> str | list[str] | bool


def _list(value) -> list:
    return value if isinstance(value, list) else [value]


def _context(request: Request) -> dict[str, Any]:
    return {k.lower(): v for k, v in request.context.items()}


def _fill(text: str, ctx: dict[str, Any]) -> str | None:
    """The text with its policy variables filled; None when one is missing (the statement then cannot match)."""
    missing = []

    def sub(m):
        value = ctx.get(m.group(1).lower())
        if value is None:
            missing.append(m.group(1))
            return ""
        return str(value)

    out = VARIABLE.sub(sub, text)
    return None if missing else out


def _matches(pattern: str, value: str, case: bool) -> bool:
    return fnmatchcase(value, pattern) if case else fnmatchcase(value.lower(), pattern.lower())


def _action_in(st: dict, action: str) -> bool:
    if "Action" in st:
        return any(_matches(p, action, case=False) for p in _list(st["Action"]))
    return not any(_matches(p, action, case=False) for p in _list(st["NotAction"]))


def _resource_in(st: dict, resource: str, ctx: dict) -> bool:
    key = "Resource" if "Resource" in st else "NotResource"
    hit = any(p is not None and _matches(p, resource, case=True) for p in (_fill(r, ctx) for r in _list(st[key])))
    return hit if key == "Resource" else not hit


def _string_match(op: str, want: str, have: str) -> bool:
    if op in ("StringEquals", "ArnEquals"):
        return want == have
    if op in ("StringLike", "ArnLike"):
        return fnmatchcase(have, want)
    raise ValueError(f"unknown operator {op}")


POSITIVE = {"StringNotEquals": "StringEquals", "StringNotLike": "StringLike", "ArnNotEquals": "ArnEquals",
            "ArnNotLike": "ArnLike"}


def _key_holds(op: str, key: str, wanted, ctx: dict) -> bool:
    prefix, _, base = op.rpartition(":")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    have = ctx.get(key.lower())
    wanted = [w for w in (_fill(str(v), ctx) for v in _list(wanted)) if w is not None]
    if base == "Null":
        return (have is None) == (str(_list(wanted)[0]).lower() == "true")
    if have is None:
        if prefix == "ForAllValues":
            return True
        return if_exists or base in POSITIVE
    if base == "Bool":
        return str(have).lower() in [str(w).lower() for w in wanted]
    negated = base in POSITIVE
    positive = POSITIVE.get(base, base)
    if positive not in ("StringEquals", "StringLike", "ArnEquals", "ArnLike"):
        raise ValueError(f"condition operator {op} is not supported by this evaluator")
    values = [str(v) for v in _list(have)]
    if prefix == "ForAllValues":
        hit = all(any(_string_match(positive, w, v) for w in wanted) for v in values)
    else:  # ForAnyValue, or a single-valued key
        hit = any(_string_match(positive, w, v) for w in wanted for v in values)
    return not hit if negated and prefix != "ForAllValues" else hit


def _condition_holds(st: dict, ctx: dict) -> bool:
    return all(_key_holds(op, key, wanted, ctx)
               for op, keys in (st.get("Condition") or {}).items() for key, wanted in keys.items())


def _statements(policy: dict) -> list[dict]:
    return _list(policy["Statement"])


def matching(policy: dict, request: Request, effect: str) -> list[dict]:
    ctx = _context(request)
    return [st for st in _statements(policy) if st["Effect"] == effect and _action_in(st, request.action)
            and _resource_in(st, request.resource, ctx) and _condition_holds(st, ctx)]


def decide(request: Request, policies: list[dict], boundary: dict | None = None) -> str:
    """'Allow', 'ExplicitDeny' or 'ImplicitDeny'."""
    every = [*policies, *([boundary] if boundary else [])]
    if any(matching(p, request, "Deny") for p in every):
        return "ExplicitDeny"
    if not any(matching(p, request, "Allow") for p in policies):
        return "ImplicitDeny"
    if boundary is not None and not matching(boundary, request, "Allow"):
        return "ImplicitDeny"
    return "Allow"


def allowed(request: Request, policies: list[dict], boundary: dict | None = None) -> bool:
    return decide(request, policies, boundary) == "Allow"

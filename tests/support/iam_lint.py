"""IAM documents through an IAM linter that knows each action's resource types: parliament (the maintained fork
ol-parliament on PyPI), which bundles AWS's Service Authorization Reference and runs offline.

parliament's RESOURCE_MISMATCH looks at one statement at a time: it flags a statement whose resources do not
cover every required type of its actions, even when another statement covers them. `uncovered` asks the
question AWS answers: for each allowed action and each resource type the reference marks required, does
any Allow statement with that action name such a resource. `findings` is parliament's own list (condition
types, unknown actions, malformed ARNs).
"""
from __future__ import annotations

import json
import re

import parliament
from parliament.statement import get_arn_format, get_privilege_info

VARIABLE = re.compile(r"\$\{[^}]+\}")


def _list(value) -> list:
    return value if isinstance(value, list) else [value]


def required_resource_types(action: str) -> list[tuple[str, str]]:
    """(resource type, ARN format) that AWS requires for `action` (marked * in the reference); ("*", "*") for
    an action that takes no resource."""
    service, name = action.split(":", 1)
    info = get_privilege_info(service, name)
    types = [rt["resource_type"] for rt in info["resource_types"]]
    if not any(types):
        return [("*", "*")]
    return [(t.rstrip("*"), get_arn_format(t, info["service_resources"])) for t in types if t.endswith("*")]


def covers(resource: str, resource_type: str, arn_format: str) -> bool:
    """Whether a policy's Resource can name a resource of the type. A policy variable stands for one value,
    any value here; an AWS-owned resource has no account in its ARN (the public SSM parameters)."""
    if resource == "*":
        return True
    pattern = VARIABLE.sub("*", resource).split(":")
    if len(pattern) > 4 and pattern[4] == "" and arn_format.split(":")[4] == "*":
        pattern[4] = "*"
    return parliament.is_arn_match(resource_type, arn_format, ":".join(pattern))


def uncovered(policy: dict) -> list[str]:
    """Each required resource type of each allowed action that no Allow statement with that action covers."""
    granted: dict[str, list[str]] = {}
    for st in _list(policy["Statement"]):
        if st["Effect"] != "Allow":
            continue
        for pattern in _list(st["Action"]):
            for a in parliament.expand_action(pattern):
                granted.setdefault(f"{a['service']}:{a['action']}", []).extend(_list(st["Resource"]))
    out = []
    for action, resources in sorted(granted.items()):
        for resource_type, arn_format in required_resource_types(action):
            if not any(covers(r, resource_type, arn_format) for r in resources):
                out.append(f"{action} needs {resource_type} ({arn_format}): no statement allows it there")
    return out


def findings(policy: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """parliament's own findings, less those in `ignore`. parliament reads a policy variable in an ARN's
    account field (`${aws:PrincipalAccount}`) as a malformed account: that INVALID_ARN is left out."""
    out = []
    for f in parliament.analyze_policy_string(json.dumps(policy)).findings:
        where = str((f.location or {}).get("string", ""))
        if f.issue in ignore or (f.issue == "INVALID_ARN" and "${" in where):
            continue
        out.append(f"{f.issue}: {f.detail} ({where})")
    return out

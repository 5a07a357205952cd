"""Whether a policy document allows an action on a resource, read the way IAM reads Action and Resource: `*` and
`?` wildcards, actions case-insensitive, resources case-sensitive (IAM User Guide, "IAM JSON policy elements:
Action" and "Resource"). A policy variable (`${aws:PrincipalAccount}`) may stand for any value here.

What it is for: before a launch creates a role that must read the user's data, checking that trainctl's permissions
boundary admits that bucket at all. A boundary without it is a job that starts, is billed, and fails reading its
data. It is deliberately optimistic where it cannot know: a statement's Condition is taken as met, and NotAction /
NotResource statements are not read, so "not admitted" is said only when no Allow statement could match.
"""
from __future__ import annotations

import fnmatch
import re

VARIABLE = re.compile(r"\$\{[^}]*\}")


def _listed(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _matches(pattern: str, value: str, case: bool) -> bool:
    pattern = VARIABLE.sub("*", pattern)
    if not case:
        pattern, value = pattern.lower(), value.lower()
    return fnmatch.fnmatchcase(value, pattern)


def allows(policy: dict, action: str, resource: str) -> bool:
    """Whether some Allow statement of `policy` names `action` on `resource` (and no Deny without a Condition
    does)."""
    statements = policy.get("Statement") or []
    statements = [statements] if isinstance(statements, dict) else statements

    def names(st: dict) -> bool:
        return (any(_matches(a, action, case=False) for a in _listed(st.get("Action")))
                and any(_matches(r, resource, case=True) for r in _listed(st.get("Resource"))))

    if any(st.get("Effect") == "Deny" and not st.get("Condition") and names(st) for st in statements):
        return False
    return any(st.get("Effect") == "Allow" and names(st) for st in statements)

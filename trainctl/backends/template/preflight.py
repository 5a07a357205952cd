"""`doctor`'s checks of this platform (backends/preflight.py): read only, each one a Check that passes, fails with
its fix, or is skipped with the reason (skipped when ctx.platforms does not name the platform)."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.preflight import Check, Preflight
from trainctl.backends.template.missing import missing


def preflight_checks(client_for: Callable[[str, str], Any], ctx: Preflight) -> list[Check]:
    raise missing("preflight.preflight_checks", "the platform's own read-only checks (or none: return [])")

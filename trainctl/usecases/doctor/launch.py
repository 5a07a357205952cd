"""`doctor SPEC`'s last check: the launch itself, run as `launch --platform P --dry-run` for each platform the
spec may use. prepare reads only and holds every check a launch makes before it creates anything (the boundary,
the data, the role, the subnet, the runtime): running it here means doctor can never pass a spec that the launch
then refuses. A refusal that an earlier check already reported is not said again.
"""
from __future__ import annotations

NAME = "launch checks"


def launch_checks(spec_path: str | None, plan, platforms: tuple[str, ...], earlier) -> list[tuple[str, str, str, str]]:
    """(check name, pass|fail|skip, what was found, the fix) per platform the plan has an option on: doctor's Check
    fields (no import of doctor: no cycle). `earlier`: the checks so far, whose failures are not repeated."""
    if not spec_path or plan is None:
        return []
    from trainctl.errors import TrainctlError
    from trainctl.state.job_store import JobStore
    from trainctl.usecases.launch.launch_job import LaunchArgs, launch

    failed = [c for c in earlier if c.status == "fail"]
    out = []
    for platform in platforms:
        name = f"{NAME} ({platform})"
        if not any(o.platform == platform for o in plan.options):
            out.append((name, "skip", f"the plan has no {platform} option to launch", ""))
            continue
        args = LaunchArgs(spec_path=spec_path, platform=platform, dry_run=True, yes=True)
        try:
            with JobStore() as store:
                doc = launch(args, store, say=lambda m: None, show=lambda o, r: None, confirm=lambda q: True)
        except TrainctlError as e:
            said = next((c for c in failed if c.detail and c.detail in str(e)), None)
            if said is not None:  # the same refusal, already said with its fix
                out.append((name, "fail", f"the launch refuses it too: see \"{said.name}\" above", ""))
            else:
                out.append((name, "fail", str(e), "fix what it names; `trainctl launch SPEC --dry-run` runs the "
                                                  "same checks"))
            continue
        calls = len(doc.get("requests", [])) if isinstance(doc, dict) else 0
        out.append((name, "pass", f"`launch --platform {platform} --dry-run` passes: {calls} AWS calls prepared", ""))
    return out

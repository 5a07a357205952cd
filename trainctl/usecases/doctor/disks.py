"""`doctor SPEC`'s disk check (and its FSx client check, from the same plan): whether the job's copied data, checkpoints and model fit a node's disk on each
platform, as the plan sized them (planner/disk.py). A layout that cannot fit is left out of the plan, so a
platform with no option left for that reason fails here in the same words `launch` would refuse with.
"""
from __future__ import annotations

NAME = "disk"


def disk_checks(plan, platforms: tuple[str, ...]) -> list[tuple[str, str, str, str]]:
    """(name, status, detail, fix) per platform of the spec."""
    out = []
    for platform in platforms:
        options = [o for o in plan.options if o.platform == platform]
        refused = [e for e in plan.excluded if e.platform == platform and "of disk per node" in e.reason]
        if options:
            best = options[0]
            said = next((w for w in best.why if w.startswith("disk: ")), "disk: not sized")
            out.append((NAME, "pass", f"{platform}: {best.count}x {best.instance_type}: {said.removeprefix('disk: ')}",
                        ""))
        elif refused:
            e = refused[0]
            out.append((NAME, "fail", f"{platform}: {e.count}x {e.instance_type} {e.reason}",
                        "stream the data (data.<channel>.mode: stream), or allow types with more disk "
                        "(candidates.families)"))
        no_client = [e for e in plan.excluded if e.platform == platform and "needs a Lustre client" in e.reason]
        if not options and no_client:
            out.append(("FSx client", "fail", f"{platform}: {no_client[0].count}x {no_client[0].instance_type}: "
                        f"{no_client[0].reason}", "launch on SageMaker, or give the channel from S3"))
    return out

"""An EC2 launch that failed or was interrupted (Ctrl-C) during submit: find what it made by tag, including
instances of a CreateFleet whose answer was lost (the call may still be carried out after the client gave
up), remove it with progress on the terminal, and on a second Ctrl-C say exactly what is left."""
from __future__ import annotations

import time
from typing import Callable

from trainctl.backends.base import JOB_TAG, SubmitTrace
from trainctl.backends.ec2.common import LIVE_STATES, instances, job_filter, tag_map

# How long a CreateFleet sent without an answer is given to show its fleet: trainctl's read timeout is 60 s,
# and AWS answers an instant fleet within it or not at all.
LOST_FLEET_WAIT_S = 90.0
POLL_S = 2.0


def await_lost_fleet(ec2, job_id: str, say: Callable[[str], None], wait_s: float = LOST_FLEET_WAIT_S) -> None:
    """Until a fleet or an instance tagged with the job shows (the call was carried out), or `wait_s` passed."""
    say(f"CreateFleet was sent without an answer: looking for what it makes (by tag {JOB_TAG}={job_id}, "
        f"up to {wait_s:.0f} s)")
    deadline = time.monotonic() + wait_s
    while True:
        fleets = [f for f in ec2.describe_fleets().get("Fleets", []) if tag_map(f).get(JOB_TAG) == job_id]
        live = instances(ec2, job_id, LIVE_STATES)
        if fleets or live:
            say(f"found {len(fleets)} fleet(s) and {len(live)} instance(s) of {job_id}")
            return
        if time.monotonic() >= deadline:
            say(f"no fleet of {job_id} after {wait_s:.0f} s: the call was not carried out")
            return
        time.sleep(POLL_S)


def left_over(ec2, job_id: str) -> list[str]:
    """What still carries the job's tag in EC2, running instances first."""
    live = [f"instance {i['InstanceId']} ({i['State']['Name']})" for i in instances(ec2, job_id, LIVE_STATES)]
    rest = [f"launch template {t['LaunchTemplateId']}"
            for t in ec2.describe_launch_templates(Filters=job_filter(job_id))["LaunchTemplates"]]
    rest += [f"placement group {g['GroupName']}"
             for g in ec2.describe_placement_groups(Filters=job_filter(job_id))["PlacementGroups"]]
    rest += [f"security group {g['GroupId']}"
             for g in ec2.describe_security_groups(Filters=job_filter(job_id))["SecurityGroups"]]
    return live + rest


def clean_up(backend, request, error: BaseException, trace: SubmitTrace | None, say: Callable[[str], None]) -> None:
    """Remove what the failed launch made; never raise over the launch's own error (a cleanup error is said,
    and `trainctl down JOB` finishes it); a second Ctrl-C stops it and says what is left."""
    from trainctl.aws import clients as aws

    job_id, ec2 = request.job_id, backend.client_for("ec2", request.region)
    interrupted = isinstance(error, KeyboardInterrupt)
    why = "Ctrl-C" if interrupted else (str(error) if type(error).__name__ == "CapacityError"
                                         else aws.error_summary(error))
    say(f"launch {'interrupted' if interrupted else 'failed'} ({why}); deleting what was created for the job"
        + (f" (Ctrl-C again stops this; `trainctl down {job_id}` then finishes it)" if interrupted else ""))
    try:
        started = trace.starting_call() if trace is not None else None
        if started is not None and started[1] == "in flight":
            await_lost_fleet(ec2, job_id, say)
        for line in backend.cleanup(job_id, request.region, say=say):
            say(f"removed {line}")
        if trace is not None and not instances(ec2, job_id, LIVE_STATES):
            trace.cleaned_up = True   # the launch may now say that nothing runs
    except KeyboardInterrupt:
        left = left_over(ec2, job_id)
        running = [x for x in left if x.startswith("instance ")]
        say(f"cleanup stopped: {'still running: ' + ', '.join(running) if running else 'no instance of the job runs'}"
            + (f"; left: {', '.join(x for x in left if x not in running)}" if len(left) > len(running) else "")
            + f"; `trainctl down {job_id}` removes them")
        raise
    except Exception as e:  # noqa: BLE001 - the launch's error is the one to raise; down finishes the cleanup
        say(f"cleanup did not finish ({aws.error_summary(e)}): `trainctl down {job_id}` removes the rest")

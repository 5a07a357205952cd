"""EC2 fleets, all or nothing: the acceptance check of the request's fleet alternatives, giving back a
short fleet, and `watch --recover` relaunching lost nodes (same AZ first, else the whole job elsewhere)."""
from __future__ import annotations

import time
from typing import Any, Callable

from botocore.exceptions import ClientError

from trainctl.backends.base import AwsCall, CapacityError, Verdict, tags
from trainctl.backends.ec2.common import (LIVE_STATES, MAX_AZ_ATTEMPTS, STATE_TAG, TERMINATED_BY_TAG,
                                          group_for, instances, job_config, name_for, security_group, tag_map)
from trainctl.backends.ec2 import replacement_claim
from trainctl.backends.ec2.attempts import RecoveryAttempts
from trainctl.backends.ec2.prepare import az_order, fleet_params
from trainctl.errors import TrainctlError

PROFILE_RETRIES, PROFILE_RETRY_S = 5, 2.0
# CreateFleet's per-pool errors that mean "no capacity here" (EC2 API reference, error codes): another AZ
# or another option may have it. Any other error with no instance fails the launch with AWS's message.
# Quota errors (VcpuLimitExceeded, MaxSpotInstanceCountExceeded, InstanceLimitExceeded) are not capacity: the
# quota is the region's, so another AZ cannot help; the launch fails with AWS's message.
CAPACITY_CODES = ("InsufficientInstanceCapacity", "InsufficientCapacity", "UnfulfillableCapacity",
                  "SpotMaxPriceTooLow", "Unsupported", "InsufficientFreeAddressesInSubnet")
# A RunInstances into a Capacity Reservation or Capacity Block refused for its capacity (EC2 API Reference, "Error
# codes for the Amazon EC2 API"): the reservation's count is taken, or EC2 has no instance for it now.
RESERVATION_CAPACITY_CODES = ("ReservationCapacityExceeded", "InsufficientInstanceCapacity",
                              "InsufficientCapacity")


def _profile_not_visible(response: dict) -> bool:
    # IAM is eventually consistent: a profile made seconds ago may not be visible to EC2 yet.
    return not _ids(response) and any("iamInstanceProfile" in e.get("ErrorMessage", "")
                                      for e in response.get("Errors", []))


def _ids(response: dict) -> list[str]:
    return [i for group in response.get("Instances", []) for i in group.get("InstanceIds", [])]


def _live(ec2, ids: list[str]) -> list[str]:
    """Only instances alive now count: a replayed ClientToken answers with the first call's instances,
    which may be gone since."""
    if not ids:
        return []
    described = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    return [i["InstanceId"] for r in described for i in r["Instances"] if i["State"]["Name"] in LIVE_STATES]


def _refuse_other_errors(response: dict, where: str) -> None:
    hard = [e for e in response.get("Errors", []) if e.get("ErrorCode") not in CAPACITY_CODES]
    if hard and not _ids(response):
        e = hard[0]
        raise TrainctlError(f"CreateFleet in {where}: {e.get('ErrorCode')}: {e.get('ErrorMessage', '')[:200]}")


def judge(ec2, call: AwsCall, params: dict, response: dict, attempt: int) -> Verdict:
    """Accept a fleet that holds every instance asked for; ask again (new token) while the new instance
    profile is not visible to EC2; reject a short fleet (capacity); fail at once on any other error."""
    if _profile_not_visible(response) and attempt < PROFILE_RETRIES:
        time.sleep(PROFILE_RETRY_S * (attempt + 1))
        return Verdict(False, retry_with={**params, "ClientToken": f"{params['ClientToken'][:60]}-p{attempt + 1}"})
    az = call.about.get("availability_zone", "?")
    _refuse_other_errors(response, az)
    want = int(params["TargetCapacitySpecification"]["TotalTargetCapacity"])
    got, fleet_id = _live(ec2, _ids(response)), response.get("FleetId")
    outputs = {"fleet_id": fleet_id, "instance_ids": got, "availability_zone": az}
    if len(got) >= want:
        return Verdict(True, outputs, f"fleet {fleet_id}: {len(got)} of {want} instances in {az}")
    why = "; ".join(sorted({e.get("ErrorCode", "?") for e in response.get("Errors", [])})) or "no error given"
    return Verdict(False, outputs, f"fleet in {az} got {len(got)} of {want} ({why})",
                   shortfall=f"{az}: {len(got)} of {want} ({why})")


def compensate(ec2, verdict: Verdict, say: Callable[[str], None]) -> None:
    got = verdict.outputs.get("instance_ids") or []
    if got:
        say(f"terminating {', '.join(got)}")
    terminate(ec2, got, verdict.outputs.get("fleet_id"))


def create_fleet(ec2, params: dict, where: str) -> tuple[list[str], list[str], str | None]:
    """For recovery (outside a launch request): (live instance ids, error codes, fleet id)."""
    call = AwsCall("ec2", "CreateFleet", params, "", about={"availability_zone": where})
    for attempt in range(PROFILE_RETRIES + 1):
        response = ec2.create_fleet(**params)
        verdict = judge(ec2, call, params, response, attempt)
        if verdict.retry_with is None:
            break
        params = verdict.retry_with
    return (verdict.outputs["instance_ids"], [e.get("ErrorCode", "?") for e in response.get("Errors", [])],
            verdict.outputs["fleet_id"])


def terminate(ec2, instance_ids: list[str], fleet_id: str | None = None) -> None:
    """Terminate instances trainctl itself gives up on, tagged first so they never count as interruptions."""
    if instance_ids:
        ec2.create_tags(Resources=instance_ids, Tags=[{"Key": TERMINATED_BY_TAG, "Value": "trainctl"}])
        ec2.terminate_instances(InstanceIds=instance_ids)
    if fleet_id:
        try:
            ec2.delete_fleets(FleetIds=[fleet_id], TerminateInstances=True)
        except Exception as e:  # noqa: BLE001
            from trainctl.aws import clients as aws

            # The instances are terminated above; an instant fleet left is only a record. EC2 answers
            # InvalidParameterCombination when the fleet has no instance left to end.
            if aws.error_code(e) not in ("InvalidFleetId.NotFound", "InvalidParameterCombination"):
                raise


# ----------------------------------------------------------------------------- recovery
# What AWS answers when `trainctl down` removed the job's resources while a recovery was using them.
GONE_CODES = ("InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound",
              "InvalidLaunchTemplateId.Malformed", "InvalidGroup.NotFound", "InvalidPlacementGroup.Unknown",
              "InvalidParameterValue")


def recover(backend, job_id: str, region: str, progress: Callable[[str], None] | None = None) -> dict:
    """`_recover`, except that a job stopped or taken down meanwhile (its launch template or security group gone
    under the recovery) ends the recovery quietly, with a line saying so, instead of AWS's NotFound error."""
    from trainctl.aws import clients as aws
    from trainctl.backends.ec2.status import stop_marked

    try:
        return _recover(backend, job_id, region, progress)
    except Exception as e:  # noqa: BLE001 - only the race with `stop`/`down` is answered here
        if aws.error_code(e) not in GONE_CODES or not stop_marked(backend.client_for, job_id, region, {}):
            raise
        if progress:
            progress(f"{job_id} is marked stopped and its resources are going; launching nothing")
        return {"launched": [], "availability_zone": None, "moved": False, "missing": 0, "interruptions": [],
                "messages": [], "stopped": True}


def _recover(backend, job_id: str, region: str, progress: Callable[[str], None] | None = None) -> dict:
    """Relaunch the capacity a job lost (reclaimed Spot nodes): the missing count in the same AZ first (same
    placement group and launch template); when that AZ has no room, the whole job moves to the next AZ that
    can hold all N. The nodes resume from the last checkpoint in S3 by themselves.

    Returns {"launched": [ids], "availability_zone", "moved": bool, "interruptions": [{instance_id,
    cost_usd}] (every interruption of the job so far), "missing": n before, "messages": [..]}, and
    "held_elsewhere" (who) when another process holds this loss's relaunch claim (bootstrap/relaunch_claim.py).
    A job that is finished, stopped or whole launches nothing."""
    messages: list[str] = []
    say = _sayer(messages, progress)
    ec2 = backend.client_for("ec2", region)
    view = backend.describe(job_id, region)
    result: dict[str, Any] = {"launched": [], "availability_zone": None, "moved": False, "missing": 0,
                              "interruptions": view.raw.get("interruptions", []), "messages": messages}
    if view.finished or view.status == "Stopping" or not view.count:
        return result
    every = instances(ec2, job_id)
    alive = [i for i in every if i["State"]["Name"] in LIVE_STATES and tag_map(i).get(STATE_TAG) != "interrupted"]
    result["missing"] = missing = view.count - len(alive)
    if missing <= 0:
        return result
    attempts = RecoveryAttempts(backend.client_for, ec2, job_id, region)
    # one relaunch per loss, whoever else saw it (another watcher, the nodes' agents): the claim first
    claim, holder = attempts.claim(_lost(every, alive))
    if claim is None:  # the caller says it (once per holder: `watch` asks at every poll)
        return {**result, "held_elsewhere": holder}
    try:
        done = _relaunch(backend, ec2, view, job_id, region, alive, missing, attempts, result, say)
    except BaseException:
        claim.release()
        raise
    if not done["launched"]:
        claim.release()
    return done


def _lost(every: list[dict], alive: list[dict]) -> list[str]:
    """The instances a loss took: not alive (or Spot-noticed), and not ended by trainctl itself (a short fleet
    given back, survivors moved): the set stays the same while a relaunch of it runs."""
    kept = {i["InstanceId"] for i in alive}
    return [i["InstanceId"] for i in every
            if i["InstanceId"] not in kept and tag_map(i).get(TERMINATED_BY_TAG) != "trainctl"]


def _relaunch(backend, ec2, view, job_id: str, region: str, alive: list[dict], missing: int,
              attempts: RecoveryAttempts, result: dict, say: Callable[[str], None]) -> dict:
    """`_recover` once this process holds the loss's claim: same AZ first, else the whole job elsewhere."""
    stopped = lambda: _stopped_meanwhile(backend, ec2, job_id, region, say)  # noqa: E731
    by_az = _subnets_by_az(ec2, job_id, stopped)
    if by_az is None:
        return result
    config = job_config(ec2, job_id)
    market = config.get("market") or view.market or "spot"
    shape = _flexible_shape(config, alive)
    home = alive[0]["Placement"]["AvailabilityZone"] if alive else (
        view.raw["instances"][-1]["availability_zone"] if view.raw.get("instances") else None)
    held = replacement_claim.claim(backend.client_for, job_id, region, config)
    if held is None:  # the survivors' own agents hold a try now (bootstrap/replacement.py): never launch twice
        say(f"another replacement of {job_id} is under way (its nodes' own, or another watch's); launching nothing")
        return result
    settle = replacement_claim.Settler(backend.client_for, job_id, region, config, held)
    try:
        return _relaunch_held(ec2, view, job_id, region, alive, missing, attempts, result, say, stopped, by_az,
                              market, shape, home, settle)
    except BaseException:
        # Ctrl-C (or an error) between the claim and its outcome: the try is recorded as refused, so the next one
        # (the nodes' own, another watch) goes at once instead of waiting out the claim's CLAIM_TTL_S
        settle.abandon()
        raise


def _relaunch_held(ec2, view, job_id: str, region: str, alive: list[dict], missing: int, attempts: RecoveryAttempts,
                   result: dict, say: Callable[[str], None], stopped: Callable[[], bool],
                   by_az: dict[str, list[str]], market: str, shape, home: str | None,
                   settle: "replacement_claim.Settler") -> dict:
    """`_relaunch` once this process also holds the replacement try (`settle` records its outcome)."""
    if alive:
        if stopped():
            return result
        got = _launch(ec2, job_id, view.instance_type, missing, market, home, sorted(by_az.get(home, [])),
                      f"r-{home}", say, attempts, shape, alive[0].get("Placement", {}).get("GroupName"))
        kept = [] if got is None or _undo_if_stopped(ec2, got, stopped) else got
        settle(kept, market, home)
        if got is not None:
            return {**result, "launched": kept, "availability_zone": home}
        say(f"{home} has no room for the {missing} missing; moving the whole job to another AZ")
        # The survivors' agents get SIGTERM at shutdown: they checkpoint and sync before going.
        terminate(ec2, [i["InstanceId"] for i in alive])
    azs = az_order(ec2, region, view.instance_type, view.count, market, None,
                   [az for az in by_az if az != home or not alive], [], shape[0])
    if not alive and home in azs:  # nothing left to move: the lost nodes' own AZ first, as the README says
        azs = [home] + [az for az in azs if az != home]
    for az in azs[:MAX_AZ_ATTEMPTS]:
        if stopped():
            return result
        got = _launch(ec2, job_id, view.instance_type, view.count, market, az, sorted(by_az[az]), f"m-{az}",
                      say, attempts, shape, az_group(ec2, job_id, az, say))
        if got is not None:
            kept = [] if _undo_if_stopped(ec2, got, stopped) else got
            settle(kept, market, az)
            return {**result, "launched": kept, "availability_zone": az, "moved": az != home or bool(alive)}
    settle(None, market, None)
    raise CapacityError(f"no capacity to recover {job_id}: " + "; ".join(result["messages"][-3:]))


def _sayer(messages: list[str], progress: Callable[[str], None] | None) -> Callable[[str], None]:
    def say(m: str) -> None:
        messages.append(m)
        if progress:
            progress(m)
    return say


def _subnets_by_az(ec2, job_id: str, stopped: Callable[[], bool]) -> dict[str, list[str]] | None:
    """The subnets of the job's VPC by AZ; None when the job's security group is gone because it was stopped."""
    group = security_group(ec2, job_id)
    if group is None:
        if stopped():
            return None
        raise TrainctlError(f"{job_id}: its security group is gone, so no node can be relaunched into it")
    vpc = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0]["VpcId"]
    by_az: dict[str, list[str]] = {}
    for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]:
        by_az.setdefault(s["AvailabilityZone"], []).append(s["SubnetId"])
    return by_az


def _flexible_shape(config: dict, alive: list[dict]) -> tuple[tuple[str, ...], float | None]:
    """(types in priority order, cap per node): a flexible layout's nodes may be replaced by any of its types,
    within the same cap per node; the survivors' type first, so the ring stays of one type while it has room."""
    types = tuple(config.get("instance_types") or ())
    kept = alive[0]["InstanceType"] if alive and alive[0]["InstanceType"] in types else None
    return ((kept, *[t for t in types if t != kept]) if kept else types), config.get("max_node_usd")


def _stopped_meanwhile(backend, ec2, job_id: str, region: str, say: Callable[[str], None]) -> bool:
    """The stop mark read fresh: `trainctl stop` or `down` may have come since this recovery's describe."""
    from trainctl.backends.ec2.status import stop_marked

    if stop_marked(backend.client_for, job_id, region, job_config(ec2, job_id)):
        say(f"{job_id} is marked stopped; launching nothing")
        return True
    return False


def _undo_if_stopped(ec2, got: list[str], stopped: Callable[[], bool]) -> bool:
    """A stop mark written while the fleet was being made: `down` may have listed the instances before these
    existed, so this recovery ends them itself."""
    if not stopped():
        return False
    terminate(ec2, got)
    return True


def az_group(ec2, job_id: str, az: str, say: Callable[[str], None]) -> str:
    """The job's cluster placement group for a move to `az`, made if missing: a cluster group lives in one AZ
    (EC2 User Guide, placement strategies: it "can't span multiple Availability Zones") and stays bound to the old
    one while the survivors shut down, so the moved job gets its own, tagged for `down` (cleanup.py)."""
    name = group_for(job_id, az)
    try:
        ec2.create_placement_group(GroupName=name, Strategy="cluster", TagSpecifications=[
            {"ResourceType": "placement-group", "Tags": tags(job_id)}])
        say(f"placement group {name} for {az}")
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") != "InvalidPlacementGroup.Duplicate":
            raise
    return name


def _launch(ec2, job_id: str, itype: str, count: int, market: str, az: str, subnets: list[str], what: str,
            say: Callable[[str], None], attempts: RecoveryAttempts,
            shape: tuple[tuple[str, ...], float | None] = ((), None), group: str | None = None) -> list[str] | None:
    """One all-or-nothing fleet for recovery: the instance ids, or None (what it got was given back). `shape`: a
    flexible layout's types and its cap per node; `group`: the cluster placement group (default: the job's)."""
    client_token, refused = attempts.next(what)
    types, node_usd = shape
    params = fleet_params(job_id, name_for(job_id), itype, count, market, subnets, client_token, types,
                          node_usd * count if node_usd else None, group)
    say(f"launching {count} x {itype if len(types) < 2 else ' or '.join(types)} {market} in {az}")
    got, errors, fleet_id = create_fleet(ec2, params, az)
    if len(got) >= count:
        say(f"fleet {fleet_id}: {', '.join(got)} in {az}; the nodes resume from the last checkpoint")
        return got
    say(f"{az} gave {len(got)} of {count} ({'; '.join(sorted(set(errors)))})")
    terminate(ec2, got, fleet_id)
    refused()  # the next attempt sends a new ClientToken, not this refusal's
    return None

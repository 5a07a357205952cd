"""EC2 backend: a plan option launched as a raw instant EC2 Fleet in a cluster placement group.

Each abstract method is a module of this folder, named as in `backends/sagemaker/`: `prepare` (what a launch
asks AWS for), `fleet` (all-or-nothing fleets:
the acceptance check of the request's fleet alternatives, giving back a short fleet, recovery), `status`
(describe, dollars, logs, the stop mark), `stopping` (`trainctl stop`: the mark, a grace, then
terminate), `cleanup` (`trainctl down`), `common` (tags and the reads that find a job's
resources by tag). Nodes run trainctl/bootstrap (user data + agent).
"""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.base import (Alternatives, AwsCall, Backend, Capabilities, LaunchRequest, LaunchSettings,
                                    RunningJob, Verdict)
from trainctl.backends.ec2 import cleanup as _cleanup
from trainctl.backends.ec2 import fleet, listing, preflight, status, stopping
from trainctl.backends.ec2.common import LIVE_STATES, PLATFORM, instances
from trainctl.backends.ec2.prepare import prepare
from trainctl.backends.ec2.capacity_block_launch import into_block, into_reservation
from trainctl.backends.features import NodesPublishBudget, RecoversLostNodes, BuysCapacityBlocks
from trainctl.backends.options import Ec2Options



class Ec2Backend(RecoversLostNodes, NodesPublishBudget, BuysCapacityBlocks, Backend):
    platform = PLATFORM
    title = "EC2"
    tagged_resource_type = "ec2:instance"
    # An instant fleet gives all N instances or submit raises CapacityError: nothing to wait for afterwards.
    capabilities = Capabilities(capacity_at_submit=True, recover=True)
    options_type = Ec2Options
    purchase_operation = "ec2:PurchaseCapacityBlock"

    @classmethod
    def reservations(cls):
        from trainctl.aws import capacity_blocks

        return capacity_blocks

    def prepare(self, option, spec: Any, settings: LaunchSettings) -> LaunchRequest:
        request = prepare(self.client_for, option, spec, settings)
        if option.capacity_block is not None:
            return into_block(request, option)
        return into_reservation(request, option) if option.capacity_reservation is not None else request

    def before_submit(self, request: LaunchRequest) -> list[str]:
        """The job's instances already running: a re-run must never tear the running job down."""
        return [i["InstanceId"] for i in instances(self.client_for("ec2", request.region), request.job_id,
                                                   LIVE_STATES)]

    def after_failed_submit(self, request: LaunchRequest, before: list[str], error: BaseException,
                            say: Callable[[str], None], trace=None) -> None:
        if before:
            return
        from trainctl.backends.ec2.interrupted_launch import clean_up

        clean_up(self, request, error, trace, say)

    def capacity_refusal(self, error: Exception) -> str | None:
        """A RunInstances into a reservation (an ODCR whose count someone else took since the plan, a block not
        yet active) refused for its capacity; a fleet's refusals are judged per alternative (`judge`)."""
        from trainctl.aws import clients as aws
        from trainctl.backends.ec2.fleet import RESERVATION_CAPACITY_CODES

        if aws.error_code(error) in RESERVATION_CAPACITY_CODES:
            return aws.error_summary(error)
        return None

    def judge(self, group: Alternatives, call: AwsCall, params: dict, response: Any, attempt: int) -> Verdict:
        return fleet.judge(self.client_for("ec2", call.region), call, params, response, attempt)

    def compensate(self, group: Alternatives, call: AwsCall, verdict: Verdict, say: Callable[[str], None]) -> None:
        fleet.compensate(self.client_for("ec2", call.region), verdict, say)

    def describe(self, job_id: str, region: str):
        return status.describe(self.client_for, job_id, region)

    def logs(self, job_id: str, region: str, cursor: dict | None):
        return status.logs(self.client_for, job_id, region, cursor)

    def stop(self, job_id: str, region: str, grace_s: float | None = None,
             say: Callable[[str], None] | None = None) -> dict:
        return stopping.stop(self.client_for, job_id, region, grace_s, say)

    def recover(self, job_id: str, region: str, progress: Callable[[str], None] | None = None) -> dict:
        return fleet.recover(self, job_id, region, progress)

    def cleanup(self, job_id: str, region: str, say: Callable[[str], None] | None = None) -> list[str]:
        return _cleanup.cleanup(self.client_for, job_id, region, say)

    def running_jobs(self, region: str) -> list[RunningJob]:
        return listing.running_jobs(self.client_for, region)

    @classmethod
    def model_output(cls, bucket: str, job_id: str) -> str:
        return f"s3://{bucket}/{job_id}/output/model/"  # the agent uploads /opt/ml/model's files there

    def submit_error_hint(self, error: BaseException) -> str:
        from trainctl.backends.ec2.spot_role import hint

        return hint(error)

    def preflight_checks(self, ctx) -> list:
        return preflight.preflight_checks(self.client_for, ctx)

    def late_preflight_checks(self, ctx) -> list:
        return preflight.late_preflight_checks(self.client_for, ctx)

"""A sandbox SageMaker job's instances: the wait for them, from the capacity pool or from the job's training plan.

Part of JobRunner (runner.py), kept apart so that one module holds what decides when a job has instances and when
it loses them to the end of its plan:
- Without a plan: a simulated wait (`Settings.starting_s`), then all InstanceCount instances in one of the job's
  subnets' AZs; capacity faults (`ctx.faults.no_capacity`) hold a Spot job in Starting until MaxWait and fail an
  On-Demand one after a short retry.
- On a training plan (ResourceConfig.TrainingPlanArn, sagemaker/training_plans.py): the job stays Pending until the
  plan is Active ("View training plan details": jobs on a plan remain Pending until it becomes Active), at most two
  days ("Training plans utilization for SageMaker training jobs": then it ends with InsufficientCapacityError); its
  instances are the plan's, so no capacity fault applies; from 30 minutes before the plan's end its instances are
  terminated (`plan_ended`: SIGTERM, the stop's grace, the checkpoints synced; the job ends Failed, its reason
  naming the plan: the status is the sandbox's choice, AWS documents the termination, not the job's status).
"""
from __future__ import annotations

import time
from datetime import datetime, timezone

from trainctl_sandbox.sagemaker import training_plans


class Provisioning:
    """The JobRunner methods that provision; they use its state, settings, faults and `_sleep`."""

    def _provision(self, restart: bool) -> str | None:
        if restart:
            self.state.transition("Restarting", "Restarting the training job after a Spot interruption")
            # at least 1 s however small the time scale: the unbilled wait must show in the whole
            # seconds AWS reports (Billable < Training after an interruption)
            ended = self._sleep(max(1.0, self.settings.real("restart_wait_s")))
        else:
            ended = self._wait_for_plan() or self._sleep(self.settings.real("starting_s"))
        if ended:
            return ended
        retry_until = time.time() + self.settings.real("capacity_retry_s")
        while not self._take_capacity():
            if not self.state.spot and time.time() >= retry_until:
                self._failure = (
                    "CapacityError: Unable to provision requested ML compute capacity "
                    f"(InsufficientInstanceCapacity: {self.instance_type}"
                    f"{' in ' + ', '.join(a for a in self.azs if a) if any(self.azs) else ''}). "
                    "Please retry using a different ML instance type.")
                return "failed"
            status = "Restarting" if restart else "Starting"
            self.state.transition(status, "Insufficient capacity error from EC2 while launching instances, retrying!")
            ended = self._sleep(0.2)
            if ended:
                return ended
        if not restart:
            self.state.transition("Starting", "Preparing the instances for training")
        return None

    def _take_capacity(self) -> bool:
        """All InstanceCount instances in one of the job's subnets' AZs (SageMaker needs the whole
        cluster); a limited pool (FaultSwitches.capacity_limit) is drawn down by what launches. A job on a
        training plan has the plan's reserved instances."""
        if self.plan is not None:
            return True
        faults = self.ctx.faults
        for az in self.azs:
            if faults.no_capacity(self.instance_type, az):
                continue
            take = getattr(faults, "take_capacity", None)
            if take is None or take(self.instance_type, az, self.instance_count, self.instance_count):
                return True
        return False

    def _wait_for_plan(self) -> str | None:
        """Pending while the job's plan has not started; "failed" after two days of it."""
        plan = self.plan
        if plan is None:
            return None
        while datetime.now(timezone.utc) < plan["StartTime"]:
            if time.time() - self.state.created_wall >= training_plans.MAX_PENDING.total_seconds():
                self._failure = (f"InsufficientCapacityError: the training job was Pending for capacity for 2 days "
                                 f"(training plan {plan['TrainingPlanName']} starts {plan['StartTime'].isoformat()})")
                return "failed"
            self.state.transition("Pending", training_plans.wait_words(plan))
            ended = self._sleep(0.2)
            if ended:
                return ended
        return None

    def _plan_ended(self) -> bool:
        """SageMaker is terminating the plan's instances (from 30 minutes before its end)."""
        return self.plan is not None and time.time() >= training_plans.reclaim_at(self.plan)

    def plan_end_reason(self) -> str:
        return (f"CapacityError: training plan {self.plan['TrainingPlanName']} ends at "
                f"{self.plan['EndTime'].isoformat()}; SageMaker terminated its instances from 30 minutes before "
                "the end")

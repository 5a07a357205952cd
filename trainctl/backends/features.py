"""What only some backends can do, as types: a backend that has it derives from the type, one that lacks it does
not, and a use case asks `isinstance(backend, Feature)`, never the platform's name. (The model: dstack's
`ComputeWith*` mixins.) What every backend has is in backends/base.py."""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from trainctl.plans import Option


class RecoversLostNodes(abc.ABC):
    """trainctl relaunches the nodes a job lost (`watch --recover`); a platform without it restarts them itself
    or not at all. Its `capabilities.recover` says the same (checked in Backend.__init_subclass__)."""

    @abc.abstractmethod
    def recover(self, job_id: str, region: str, progress: Callable[[str], None] | None = None) -> dict:
        """Relaunch lost capacity; returns what was done, as one JSON document. Exactly one of several callers
        that saw the same loss relaunches it: the others launch nothing and get `held_elsewhere` (who does)."""


class OneTypePerJob:
    """The platform takes one instance type per job: a flexible plan option (several types) launches as its types
    in priority order, tried one after the other under --failover (without it, the first type only)."""

    title: str

    @classmethod
    def launch_units(cls, option: "Option", failover: bool, say: Callable[[str], None]) -> list["Option"]:
        if not option.flexible:
            return [option]
        types = option.instance_types if failover else option.instance_types[:1]
        if not failover:
            say(f"{cls.title} takes one type per job: launching {types[0]} of {option.type_label}; --failover "
                f"tries {', '.join(option.instance_types[1:])} next when it gets no capacity")
        return [option.model_copy(update={"instance_type": t, "instance_types": (t,), "flexible_group": None})
                for t in types]


class ChoosesDistribution(abc.ABC):
    """The platform starts the processes of a job itself, in a way the user picks (--distribution); a backend
    without it runs torch_distributed (torchrun) on every node."""

    @classmethod
    @abc.abstractmethod
    def distribution_kind(cls, options: Any, spec: Any) -> str:
        """The distribution the job runs with, from the backend's options and the spec."""


class NodesPublishBudget:
    """The job's nodes publish its budget marks to the `launch --notify` topic themselves, so `watch` does not."""


class ArchivesModel:
    """The platform packs the job's model into one archive (SageMaker: `model.tar.gz` of /opt/ml/model, the key
    DescribeTrainingJob's `S3ModelArtifacts` names); `fetch` extracts it. A backend without it leaves the model's
    files as they are under its output prefix."""


class BuysCapacityBlocks(abc.ABC):
    """`launch --buy-capacity-block` buys the reserved capacity the plan offers for this platform and launches into
    it (EC2: PurchaseCapacityBlock, then the capacity-block market; SageMaker: CreateTrainingPlan, then the training
    job with the plan's ARN). `reservations()` is the module that reads, prices and buys it, each reservation in the
    shape of an EC2 Capacity Reservation (aws/capacity_blocks.py, aws/training_plans.py)."""

    reserved_kind: str = "capacity block"       # what the platform's reserved capacity is called, in messages
    purchase_operation: str = ""                # the call that buys it, as --dry-run shows it
    # How long before the reservation's start a job may be submitted: the platform queues it until the start (SageMaker
    # keeps a job on a Scheduled plan Pending, for at most two days); 0: nothing can be launched before the start
    queues_before_start_hours: float = 0.0

    @classmethod
    @abc.abstractmethod
    def reservations(cls) -> Any:
        """The module with `held_blocks(region, type, spec_name)`, `purchase_params(offering, job, spec)` and
        `purchase(region, params)`."""

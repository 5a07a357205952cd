"""EC2 across a sandbox restart (`trainctl sandbox down`, then `up`): the account's VPCs, instances, fleets, launch
templates and placement groups are kept (server/persist.py), but an instance cannot go on running without the
sandbox: its processes are the server's children and its disk, the node's folder, is in the server's own folder.

So an instance that runs when the sandbox stops ends there, as an instance whose host failed under it and whose
instance-store root is gone ("data in an instance store persists only during the lifetime of its associated
instance", lost "if the underlying disk drive fails": EC2 User Guide, "Instance store temporary block storage"):
terminated, StateReason `Server.InternalError`, the code EC2 has for an internal error that ended an instance (EC2
API Reference, StateReason: "An internal error caused the instance to terminate during launch"; it lists none for a
host lost later), at the time the sandbox stopped (what StateTransitionReason says, and what the bill counts to). Not "running" forever with nothing behind it, billed and
never finishing. A trainctl job on those nodes is then Failed with that reason, as a SageMaker job running at the
stop is (sagemaker/ended.py), and `watch --recover` does not replace them (EC2 ended them for another reason than
Spot: trainctl/backends/ec2/status.py, lost_otherwise). A stopped instance stays stopped, a terminated one
terminated.
"""
from __future__ import annotations

from typing import Any

from trainctl_sandbox.ec2.interrupts import ended
from trainctl_sandbox.server.context import SandboxContext

ENDED_WITH_SANDBOX = ("Server.InternalError", "Internal error: the sandbox stopped while the instance ran "
                      "(`trainctl sandbox down`); its processes and its disk ended with it")
RUNNING = ("pending", "running", "stopping", "shutting-down")


def stopping(ctx: SandboxContext) -> None:
    """Before the account is saved: every instance that runs ends, with the reason and the time."""
    from moto.ec2.models import ec2_backends

    for account in list(ec2_backends):
        for backend in list(dict.values(ec2_backends[account])):
            for instance in list(backend.all_instances()):
                _end(instance)


def _end(instance: Any) -> None:
    if instance._state.name not in RUNNING:
        return
    try:
        instance.terminate()
    except Exception:  # noqa: BLE001 - moto's own bookkeeping (its fleet record) may be half made: ended anyway
        from moto.ec2.models.instances import InstanceState

        instance._state = InstanceState("terminated", 48)
    ended(instance, *ENDED_WITH_SANDBOX)

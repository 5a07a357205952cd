"""What the template's functions raise until they are written (delete this module from the copy when none is
left): one line naming the function and what it must do."""
from __future__ import annotations

from trainctl.errors import TrainctlError


class Unwritten(TrainctlError):
    """A part of a new backend that is still the template's."""


def missing(where: str, what: str) -> Unwritten:
    return Unwritten(f"backend template: implement {where}: {what}")

"""One change to moto's EC2 backend at a time.

AWS makes each API call atomic: a DescribeInstances that runs beside a CreateFleet sees the fleet's instances
whole or not at all, and a TerminateInstances beside it never fails for it. moto's backend is plain dicts and
lists, and its server answers each request on its own thread: a call that reads or changes them while
CreateFleet is still making instances can see one half made or fail outright ("dictionary changed size during
iteration"), which the client then reads as an HTML page instead of AWS's XML. So every EC2 call that reaches
moto, and every change the sandbox makes to instances off a request (a Spot reclaim, a Capacity Block's end, an
instance's own shutdown), holds this lock. Added latency is waited out before it is taken, so a held call never
blocks the others.
"""
from __future__ import annotations

import threading

EC2 = threading.RLock()

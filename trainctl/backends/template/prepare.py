"""What a launch asks AWS for: `prepare` reads what it needs and returns the complete, ordered list of write calls
with their exact boto3 parameters (backends/calls.py: AwsCall, LaunchRequest). It writes nothing: `launch
--dry-run` prints the request and `submit` runs exactly it. Every resource made is tagged with
`backends.base.tags(job_id)`; names come from naming/resources.py."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.base import LaunchRequest, LaunchSettings
from trainctl.backends.template.missing import missing


def prepare(client_for: Callable[[str, str], Any], option, spec: Any, settings: LaunchSettings) -> LaunchRequest:
    raise missing("prepare.prepare", "the LaunchRequest of every call the launch of `option` makes, reads only")

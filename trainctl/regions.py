"""AWS region names checked against the partitions botocore ships (botocore/data/partitions.json), so that a
misspelt `--region` is one line at the start instead of a parser error from an endpoint that does not exist.

Only the JSON file is read: neither boto3 nor a botocore session is created (the check runs on every command
given `--region`)."""
from __future__ import annotations

import difflib
import json
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

from trainctl.errors import UsageError


@lru_cache(maxsize=1)
def known_regions() -> dict[str, str]:
    """{region: partition} for every region of every partition botocore knows (its '*-global' pseudo-regions
    left out: they are not regions a job runs in)."""
    spec = find_spec("botocore")
    if spec is None or spec.origin is None:
        return {}
    data = json.loads((Path(spec.origin).parent / "data" / "partitions.json").read_text())
    return {region: part["id"] for part in data["partitions"] for region in part["regions"]
            if not region.endswith("-global")}


def check_region(name: str, where: str = "--region") -> str:
    """`name` if it is a region botocore knows; otherwise a UsageError of one line with the closest names."""
    regions = known_regions()
    if not regions or name in regions:  # no botocore to ask (cannot happen with trainctl installed): let AWS say
        return name
    close = difflib.get_close_matches(name, list(regions), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}?" if close else "use a name such as us-east-1 or eu-west-1"
    raise UsageError(f"{where} {name!r} is not a region of any AWS partition this botocore knows; {hint} "
                     "(`aws ec2 describe-regions` lists the regions your account can use; a region newer than "
                     "botocore needs `pip install -U botocore`)")

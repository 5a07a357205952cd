"""AWS region names and their partitions, from the data botocore ships; ARNs in a region's partition.

Region names are checked against the partitions botocore ships (botocore/data/partitions.json), so that a
misspelt `--region` is one line at the start instead of a parser error from an endpoint that does not exist.

Only the JSON file is read: neither boto3 nor a botocore session is created (the check runs on every command
given `--region`)."""
from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

from trainctl.errors import UsageError


@lru_cache(maxsize=1)
def _partitions() -> list[dict]:
    spec = find_spec("botocore")
    if spec is None or spec.origin is None:
        return []
    return json.loads((Path(spec.origin).parent / "data" / "partitions.json").read_text())["partitions"]


@lru_cache(maxsize=1)
def known_regions() -> dict[str, str]:
    """{region: partition} for every region of every partition botocore knows (its '*-global' pseudo-regions
    left out: they are not regions a job runs in)."""
    return {region: part["id"] for part in _partitions() for region in part["regions"]
            if not region.endswith("-global")}


def partition_of(region: str) -> str:
    """aws, aws-cn, aws-us-gov...: the region's partition as botocore finds it (its listed regions, then each
    partition's regionRegex); ARNs must carry it. A placeholder (`trainctl iam-policy` prints policies for
    REGION) or a region no partition matches: the commercial partition, where new regions open."""
    if region in known_regions():
        return known_regions()[region]
    for part in _partitions():
        if part.get("regionRegex") and re.match(part["regionRegex"], region):
            return part["id"]
    return "aws"


def arn(region: str, service: str, account: str, resource: str, *, regional: bool = True) -> str:
    return f"arn:{partition_of(region)}:{service}:{region if regional else ''}:{account}:{resource}"


def s3_arn(region: str, bucket_and_key: str) -> str:
    return f"arn:{partition_of(region)}:s3:::{bucket_and_key}"


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



@lru_cache(maxsize=1)
def _ce_regions() -> dict[str, str]:
    """{partition: the Region of its Cost Explorer endpoint}, from botocore's endpoints.json (service `ce`: its
    partitionEndpoint's credentialScope: us-east-1 in aws, cn-northwest-1 in aws-cn; aws-us-gov lists none)."""
    spec = find_spec("botocore")
    if spec is None or spec.origin is None:
        return {"aws": "us-east-1"}
    data = json.loads((Path(spec.origin).parent / "data" / "endpoints.json").read_text())
    out = {}
    for part in data["partitions"]:
        ce = part["services"].get("ce") or {}
        scope = ce.get("endpoints", {}).get(ce.get("partitionEndpoint", ""), {}).get("credentialScope", {})
        if scope.get("region"):
            out[part["partition"]] = scope["region"]
    return out


def ce_region(region: str) -> str | None:
    """Where Cost Explorer answers for an account working in `region`; None when its partition has none."""
    return _ce_regions().get(partition_of(region))

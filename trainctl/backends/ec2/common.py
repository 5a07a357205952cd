"""What the EC2 backend's parts share: its tags, its constants, and the reads that find a job's resources
again by its tag (never by remembered ids)."""
from __future__ import annotations

import base64
import json

from trainctl.naming import bucket as job_bucket_layout
from trainctl.naming.resources import ec2_log_group, job_resource_name
from trainctl.naming.tags import JOB_TAG, MARKET_TAG, NODES_TAG, STATE_TAG, TERMINATED_BY_TAG  # noqa: F401 (the backend's tags)

PLATFORM = "ec2"
LIVE_STATES = ("pending", "running")
MAX_AZ_ATTEMPTS = 3
# The user data carries the node config between these markers (bootstrap/userdata.sh).
CONFIG_START, CONFIG_END = "<<'TRAINCTL_CONFIG'\n", "\nTRAINCTL_CONFIG\n"

name_for = job_resource_name


def group_for(job_id: str, az: str, first: bool = False) -> str:
    """The job's cluster placement group in `az`: the job's own name in the launch's first AZ, `<name>-<az>` in any
    other (a cluster group lives in one AZ: EC2 User Guide, placement strategies; fleet.az_group, prepare.py)."""
    return name_for(job_id) if first else f"{name_for(job_id)}-{az}"
log_group = ec2_log_group


def tag_map(resource: dict) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in resource.get("Tags") or []}


def job_filter(job_id: str) -> list[dict]:
    return [{"Name": f"tag:{JOB_TAG}", "Values": [job_id]}]


def security_group(ec2, job: str, vpc: str | None = None) -> str | None:
    filters = job_filter(job) + ([{"Name": "vpc-id", "Values": [vpc]}] if vpc else [])
    groups = ec2.describe_security_groups(Filters=filters)["SecurityGroups"]
    return groups[0]["GroupId"] if groups else None


def launch_template(ec2, job: str) -> str | None:
    found = ec2.describe_launch_templates(Filters=job_filter(job))["LaunchTemplates"]
    return found[0]["LaunchTemplateId"] if found else None


def instances(ec2, job: str, states: tuple[str, ...] | None = None) -> list[dict]:
    filters = job_filter(job) + ([{"Name": "instance-state-name", "Values": list(states)}] if states else [])
    out = []
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        out += [i for r in page["Reservations"] for i in r["Instances"]]
    return out


def job_config(ec2, job_id: str) -> dict:
    """The node config inside the job's launch template user data (bucket, nnodes, args), if it still exists."""
    lt = launch_template(ec2, job_id)
    if not lt:
        return {}
    data = ec2.describe_launch_template_versions(LaunchTemplateId=lt, Versions=["$Latest"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    text = base64.b64decode(data.get("UserData", "")).decode(errors="replace")
    start, end = text.find(CONFIG_START), text.find(CONFIG_END)
    if start < 0 or end < 0:
        return {}
    market = tag_map(ec2.describe_launch_templates(LaunchTemplateIds=[lt])["LaunchTemplates"][0]).get(MARKET_TAG)
    return {**json.loads(text[start + len(CONFIG_START):end]), "launch_template_id": lt, "market": market}


def bucket_of(client_for, region: str, config: dict) -> tuple[str, str]:
    """(the job's bucket, the account that must own it): every S3 call names the owner it expects."""
    if config.get("bucket") and config.get("bucket_owner"):
        return config["bucket"], config["bucket_owner"]
    account = client_for("sts", region).get_caller_identity()["Account"]
    return config.get("bucket") or job_bucket_layout.job_bucket(account, region), account

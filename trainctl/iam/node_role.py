"""The EC2 nodes' role of one job: its trust policy and what the nodes may do (written per job by the EC2
launch under /trainctl/ with the permissions boundary)."""
from __future__ import annotations

from trainctl.iam.boundary import data_decrypt_statements, data_read_statements, secret_statements
from trainctl.naming.bucket import JOB_WRITABLE
from trainctl.naming.resources import arn, ec2_log_group, job_resource_name, s3_arn
from trainctl.naming.tags import JOB_TAG, STATE_TAG, TERMINATED_BY_TAG

EC2_TRUST = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}



def node_policy(job_id: str, bucket: str, region: str, account: str, code_key: str,
                secrets: tuple[str, ...] = (), topic: str | None = None,
                data: tuple[tuple[str, str], ...] = (), agent_key: str | None = None,
                data_keys: tuple[str, ...] = ()) -> dict:
    """What a node may do: read its code and its node agent (`agent_key`; both by content hash) and its job's objects, write only its job's
    checkpoints/, logs/ and status/, in a bucket its account owns; its job's log group; see its peers; mark
    itself interrupted; read exactly the job's secrets and its input data (each (bucket, prefix) of `data`).
    Always within the boundary (iam/boundary.py)."""
    group, own = ec2_log_group(job_id), {"StringEquals": {"s3:ResourceAccount": account}}
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadCodeAndJob", "Effect": "Allow", "Action": "s3:GetObject", "Condition": own,
         "Resource": [s3_arn(region, f"{bucket}/{code_key}"),
                      *([s3_arn(region, f"{bucket}/{agent_key}")] if agent_key else []),
                      s3_arn(region, f"{bucket}/{job_id}/*")]},
        # AbortMultipartUpload: a checkpoint upload cut short is aborted, not left billed in parts
        {"Sid": "WriteJobFolders", "Effect": "Allow", "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
         "Condition": own,
         "Resource": [s3_arn(region, f"{bucket}/{job_id}/{folder}/*") for folder in JOB_WRITABLE]},
        # Nodes prune old checkpoints after each upload (a long job would fill the bucket and every restore).
        {"Sid": "PruneJobCheckpoints", "Effect": "Allow", "Action": "s3:DeleteObject", "Condition": own,
         "Resource": s3_arn(region, f"{bucket}/{job_id}/checkpoints/*")},
        {"Sid": "ListJobPrefix", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": s3_arn(region, bucket),
         "Condition": {**own, "StringLike": {"s3:prefix": [f"{job_id}/*"]}}},
        {"Sid": "JobLogs", "Effect": "Allow",
         "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
         "Resource": [arn(region, "logs", account, f"log-group:{group}"),
                      arn(region, "logs", account, f"log-group:{group}:*")]},
        # EC2's Describe actions cannot be limited to resources; they reveal no data, only metadata.
        {"Sid": "FindPeers", "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
        # a node in a Capacity Block reads the block's end again (bootstrap/block_end.py: an extension moves it)
        {"Sid": "ReadBlockEnd", "Effect": "Allow", "Action": "ec2:DescribeCapacityReservations", "Resource": "*"},
        {"Sid": "MarkInterrupted", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": arn(region, "ec2", account, "instance/*"),
         "Condition": {"StringEquals": {f"aws:ResourceTag/{JOB_TAG}": job_id},
                       "ForAllValues:StringEquals": {"aws:TagKeys": [STATE_TAG, TERMINATED_BY_TAG]}}},
        *replacement_statements(job_id, region, account),
        *secret_statements([a for a in secrets if ":ssm:" in a], [a for a in secrets if ":secretsmanager:" in a]),
        # `launch --notify TOPIC`: the agent publishes the budget's marks and its stop to that one topic
        *([{"Sid": "JobNews", "Effect": "Allow", "Action": "sns:Publish", "Resource": topic}] if topic else []),
        *data_read_statements(data, region),
        *data_decrypt_statements(data_keys, region),  # the data's SSE-KMS keys (backends/data_keys.py)
    ]}


LAUNCHED = ("instance/*", "volume/*", "network-interface/*")  # what a launch from the job's template creates, tagged
USED = ("subnet/*", "security-group/*", "image/*", "placement-group/*", "key-pair/*")


def replacement_statements(job_id: str, region: str, account: str) -> list[dict]:
    """The survivors' agents replace a reclaimed node (bootstrap/replacement.py): CreateFleet (and the RunInstances
    it authorizes) from a launch template that carries this job's tag only (EC2 User Guide, "Use launch templates
    to control launching instances"; every launch with a template authorizes the template itself), creating only
    resources tagged with the job (aws:RequestTag, tags on create: ec2:CreateAction), passing only this job's role
    to EC2 (the template's instance profile), and ending only the job's instances (a replacement a stop made moot)."""
    ec2 = lambda r: arn(region, "ec2", account, r)  # noqa: E731
    launch = ["ec2:CreateFleet", "ec2:RunInstances"]
    tagged = {"StringEquals": {f"aws:RequestTag/{JOB_TAG}": job_id}}
    return [
        {"Sid": "ReplaceFromJobTemplate", "Effect": "Allow", "Action": launch, "Resource": ec2("launch-template/*"),
         "Condition": {"StringEquals": {f"aws:ResourceTag/{JOB_TAG}": job_id}}},
        {"Sid": "ReplaceJobFleet", "Effect": "Allow", "Action": "ec2:CreateFleet", "Resource": ec2("fleet/*"),
         "Condition": tagged},
        {"Sid": "ReplaceJobInstances", "Effect": "Allow", "Action": launch, "Resource": [ec2(r) for r in LAUNCHED],
         "Condition": tagged},
        # ec2:LaunchTemplate is a condition key of RunInstances only (Service Authorization Reference); the instant
        # fleet's own RunInstances is what launches, so the resources it uses are bounded there
        {"Sid": "ReplaceWithTemplateResources", "Effect": "Allow", "Action": "ec2:RunInstances",
         "Resource": [*(ec2(r) for r in USED), arn(region, "ec2", "", "image/*")],
         "Condition": {"ArnLike": {"ec2:LaunchTemplate": ec2("launch-template/*")}}},
        {"Sid": "FleetUsesTemplateResources", "Effect": "Allow", "Action": "ec2:CreateFleet",
         "Resource": [*(ec2(r) for r in USED), arn(region, "ec2", "", "image/*")]},
        {"Sid": "TagReplacementsOnCreate", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": [ec2(r) for r in ("fleet/*", *LAUNCHED)],
         "Condition": {**tagged, "StringEquals": {**tagged["StringEquals"],
                                                  "ec2:CreateAction": ["CreateFleet", "RunInstances"]}}},
        {"Sid": "PassOwnRoleToReplacements", "Effect": "Allow", "Action": "iam:PassRole",
         "Resource": arn(region, "iam", account, f"role/trainctl/{job_resource_name(job_id)}", regional=False),
         "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}},
        {"Sid": "EndJobReplacements", "Effect": "Allow", "Action": "ec2:TerminateInstances",
         "Resource": ec2("instance/*"), "Condition": {"StringEquals": {f"aws:ResourceTag/{JOB_TAG}": job_id}}},
    ]

"""SageMaker training jobs through plain boto3 (no sagemaker SDK at run time: it costs 1-2 s and 300 MB+).

prepare() reads (account, role, bucket, code object, default VPC) and returns the exact write calls:
bucket set-up when trainctl owns the bucket, the code tarball when its content hash is new, a
self-referencing security group, and CreateTrainingJob per the SageMaker PyTorch container contract
(see /work/shared/reference/AWS-NOTES.md, "SageMaker training jobs through plain boto3").
"""
from __future__ import annotations

import json
import math
import re
import urllib.parse
from pathlib import Path
from typing import Any, Callable

from trainctl import aws
from trainctl.backends.base import (JOB_TAG, AwsCall, JobView, LaunchRequest, LaunchSettings, LogLine, Transition,
                                    run_calls, self_only_security_group, tags)
from trainctl.errors import TrainctlError, UsageError

DEFAULT_ROLE = "trainctl-sagemaker-execution"
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
CHECKPOINT_LOCAL = "/opt/ml/checkpoints"
MAX_SECONDS = 2419200  # SageMaker's limit on MaxRuntime and MaxWait (28 days)
BUNDLED_PROGRAMS = {"ddp": "train_ddp.py", "neuron": "train_neuron.py"}
ENTRYPOINTS_DIR = Path(__file__).resolve().parents[1] / "entrypoints"
# Log lines fetched again behind the newest seen: CloudWatch may ingest a line a little after a
# later one from another host; event ids make the overlap harmless.
LOG_LOOKBACK_MS = 5000
MAX_LOG_PAGES = 5  # per poll: bounded calls however much was written; the rest comes next poll
RELIST_EVERY = 15  # polls between DescribeLogStreams calls while every host's stream is known


def job_bucket(account: str, region: str) -> str:
    return f"trainctl-{account}-{region}"


def _hp(value: Any) -> str:
    # The SDK's contract: every hyperparameter JSON-encoded (strings keep their quotes).
    return json.dumps(value)


def _trusts_sagemaker(doc: Any) -> bool:
    if isinstance(doc, str):
        doc = json.loads(urllib.parse.unquote(doc))
    for st in doc.get("Statement", []):
        if st.get("Effect") != "Allow":
            continue
        actions = st.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        services = (st.get("Principal") or {}).get("Service", [])
        services = [services] if isinstance(services, str) else services
        if "sagemaker.amazonaws.com" in services and any(a in ("sts:AssumeRole", "sts:*", "*") for a in actions):
            return True
    return False


def _code(e: Exception) -> str:
    return aws.error_code(e)


def _newest_attempt_streams(streams: list[str]) -> int:
    """How many hosts logged in the newest attempt ({job}/algo-{n}-{epoch}: a restart has a new epoch)."""
    epochs = [int(m.group(1)) for m in (re.search(r"-(\d+)$", s) for s in streams) if m]
    return epochs.count(max(epochs)) if epochs else 0


class SageMakerBackend:
    platform = "sagemaker"
    # CreateTrainingJob succeeds before SageMaker has instances: a --failover launch watches for capacity.
    capacity_at_submit = False

    # ------------------------------------------------------------------ prepare (reads only)
    def _role_arn(self, account: str, partition: str, wanted: str | None, region: str) -> tuple[str, str]:
        name = wanted or DEFAULT_ROLE
        if name.startswith("arn:"):
            arn, name = name, name.rsplit("/", 1)[-1]
            if f":{account}:" not in arn:  # another account's role: we cannot read it, SageMaker will check
                return arn, f"execution role {arn} (another account: not checked)"
        else:
            arn = None
        fix = (f"create an IAM role named {DEFAULT_ROLE} that trusts sagemaker.amazonaws.com with S3 access to "
               f"the job bucket, or pass --role NAME|ARN (or set role: in the spec)")
        try:
            role = aws.client("iam", region).get_role(RoleName=name)["Role"]
        except Exception as e:  # noqa: BLE001
            if _code(e) == "NoSuchEntity":
                raise TrainctlError(f"SageMaker execution role {name!r} not found in account {account}: {fix}") from None
            if _code(e) in ("AccessDenied", "AccessDeniedException"):
                return arn or f"arn:{partition}:iam::{account}:role/{name}", \
                    f"execution role {name} (no iam:GetRole permission: trust not checked)"
            raise
        if not _trusts_sagemaker(role.get("AssumeRolePolicyDocument", {})):
            raise TrainctlError(f"IAM role {name!r} does not trust sagemaker.amazonaws.com: add a trust policy "
                                f"statement allowing sts:AssumeRole for Service sagemaker.amazonaws.com, or {fix}")
        return role["Arn"], f"execution role {role['Arn']}"

    def _subnet(self, region: str, az: str | None, user_subnet: str | None) -> tuple[str, str, str]:
        ec2 = aws.client("ec2", region)
        if user_subnet:
            sn = ec2.describe_subnets(SubnetIds=[user_subnet])["Subnets"][0]
            return sn["SubnetId"], sn["VpcId"], f"subnet {sn['SubnetId']} in {sn['AvailabilityZone']} (given)"
        vpcs = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"]
        if not vpcs:
            raise TrainctlError(f"no default VPC in {region}: pass --subnet SUBNET_ID (a subnet with a route to S3)")
        vpc = vpcs[0]["VpcId"]
        subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]
        if not subnets:
            raise TrainctlError(f"default VPC {vpc} in {region} has no subnets: pass --subnet SUBNET_ID")
        # Deterministic: by AZ name, then the subnet with the most free addresses, then id.
        subnets.sort(key=lambda s: (s["AvailabilityZone"], -s.get("AvailableIpAddressCount", 0), s["SubnetId"]))
        if az:
            match = [s for s in subnets if az in (s["AvailabilityZone"], s.get("AvailabilityZoneId"))]
            if match:
                return match[0]["SubnetId"], vpc, (f"subnet {match[0]['SubnetId']} in {az}: the AZ with the best "
                                                   "placement score for this layout")
            first = subnets[0]
            return first["SubnetId"], vpc, (f"no default-VPC subnet in {az}; using {first['SubnetId']} in "
                                            f"{first['AvailabilityZone']} (first AZ by name)")
        first = subnets[0]
        return first["SubnetId"], vpc, (f"no placement score picked an AZ; using subnet {first['SubnetId']} in "
                                        f"{first['AvailabilityZone']} (first AZ by name, chosen deterministically)")

    def prepare(self, option: dict, spec: Any, settings: LaunchSettings) -> LaunchRequest:
        from trainctl import packaging
        from trainctl.catalog import load_catalog
        from trainctl.images import training_image

        if option.get("platform") != "sagemaker":
            raise UsageError(f"option {option.get('rank')} is for {option.get('platform')}, not sagemaker")
        region, job_id = option["region"], settings.job_id
        itype, count, market = option["instance_type"], int(option["count"]), option["market"]
        catalog = load_catalog()
        inst = catalog.instances.get(itype)
        if inst is None or not inst.sagemaker_training:
            raise UsageError(f"{itype} is not a SageMaker training instance type")
        notes: list[str] = []
        calls: list[AwsCall] = []

        ident = aws.client("sts", region).get_caller_identity()
        account, partition = ident["Account"], ident["Arn"].split(":")[1]
        role_arn, note = self._role_arn(account, partition, settings.role or spec.role, region)
        notes.append(note)

        # --- bucket: trainctl's own is created and locked down; a user's bucket is used as it is
        s3 = aws.client("s3", region)
        bucket = settings.bucket or job_bucket(account, region)
        own_bucket = settings.bucket is None
        try:
            s3.head_bucket(Bucket=bucket)
            exists = True
        except Exception as e:  # noqa: BLE001
            if _code(e) not in ("404", "NoSuchBucket", "NotFound"):
                raise TrainctlError(f"job bucket {bucket}: {aws.error_summary(e)}") from None
            exists = False
        if not exists:
            if not own_bucket:
                raise UsageError(f"--bucket {bucket}: no such bucket in {region}; create it or drop --bucket")
            params: dict[str, Any] = {"Bucket": bucket}
            if region != "us-east-1":
                params["CreateBucketConfiguration"] = {"LocationConstraint": region}
            calls.append(AwsCall("s3", "CreateBucket", params, region, ok_errors=("BucketAlreadyOwnedByYou",),
                                 why="the account's trainctl job bucket"))
            # Shared by every job of the account and region: tagged with the job that created it,
            # and marked shared so cleanup of that job leaves it alone.
            calls.append(AwsCall("s3", "PutBucketTagging", {"Bucket": bucket, "Tagging": {"TagSet": tags(
                job_id, **{"trainctl:shared": "true"})}}, region, why="tag the bucket"))
            notes.append(f"job bucket {bucket} will be created (SSE-S3 encrypted, public access blocked)")
        else:
            notes.append(f"job bucket {bucket} exists")
        if own_bucket:  # idempotent: keeps trainctl's bucket locked down even if someone loosened it
            calls.append(AwsCall("s3", "PutBucketEncryption", {"Bucket": bucket, "ServerSideEncryptionConfiguration": {
                "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"},
                           "BucketKeyEnabled": True}]}}, region, why="encrypt objects at rest by default"))
            calls.append(AwsCall("s3", "PutPublicAccessBlock", {"Bucket": bucket, "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True}}, region, why="block every form of public access"))

        # --- code
        ep = spec.entrypoint
        if ep.bundled:
            root, program = ENTRYPOINTS_DIR, BUNDLED_PROGRAMS[ep.bundled]
            skip = ("__init__.py",)  # makes the folder a package here; the container runs a script
        else:
            root = (Path(settings.spec_path).resolve().parent / ep.source_dir).resolve()
            program, skip = ep.script, ()
            if not (root / program).is_file():
                raise UsageError(f"entrypoint script {program} not found in source_dir {root}")
        pkg = packaging.pack(root, skip)
        key = f"trainctl/code/{pkg.key_hash}/sourcedir.tar.gz"
        try:
            s3.head_object(Bucket=bucket, Key=key)
            notes.append(f"code {len(pkg.files)} files, sha256 {pkg.sha256[:12]}: already at s3://{bucket}/{key}")
        except Exception as e:  # noqa: BLE001
            if _code(e) not in ("404", "NoSuchKey", "NotFound", "NoSuchBucket"):
                raise TrainctlError(f"s3://{bucket}/{key}: {aws.error_summary(e)}") from None
            calls.append(AwsCall("s3", "PutObject", {
                "Bucket": bucket, "Key": key, "Body": pkg.data, "ServerSideEncryption": "AES256",
                "ContentType": "application/gzip", "Tagging": urllib.parse.urlencode({JOB_TAG: job_id}),
                "Metadata": {"sha256": pkg.sha256}}, region, why=f"code: {', '.join(pkg.files)}"))
            notes.append(f"code {len(pkg.files)} files ({', '.join(pkg.files)}), {len(pkg.data)} bytes, "
                         f"sha256 {pkg.sha256[:12]}")
        if "requirements.txt" in pkg.files:
            notes.append("requirements.txt shipped: the container pip-installs it before the script starts")
        source_uri = f"s3://{bucket}/{key}"

        # --- network: one subnet in the best-scored AZ, a group that only talks to itself
        subnet, vpc, note = self._subnet(region, option.get("availability_zone"), settings.extra.get("subnet"))
        notes.append(note)
        sg_given = settings.extra.get("security_group")
        if sg_given:
            sg_ref = sg_given
            notes.append(f"security group {sg_given} (given)")
        else:
            sg_ref = "${security_group_id}"
            calls.extend(self_only_security_group(job_id, f"trainctl-{job_id}", vpc, region, tags(job_id), "hosts"))

        # --- the training job
        batch = spec.workload.batch_size_per_accelerator
        accelerators = int(option.get("accelerators") or count * inst.accelerator_count)
        user_args = dict(ep.args)
        hps: dict[str, str] = {}
        if ep.bundled:
            # The bundled entrypoint counts steps; the spec counts samples.
            if "batch-size" not in user_args and "batch_size" not in user_args:
                user_args["batch-size"] = batch
            if "steps" not in user_args:
                user_args["steps"] = max(1, math.ceil(spec.workload.total_samples / (batch * max(1, accelerators))))
            if "checkpoint-seconds" not in user_args:
                user_args["checkpoint-seconds"] = int(spec.constraints.checkpoint_interval_minutes * 60)
        for k, v in user_args.items():
            hps[str(k)] = _hp(v)
        hps.update({"sagemaker_program": _hp(program), "sagemaker_submit_directory": _hp(source_uri),
                    "sagemaker_container_log_level": "20", "sagemaker_job_name": _hp(job_id),
                    "sagemaker_region": _hp(region), "sagemaker_instance_type": _hp(f"ml.{itype}")})
        if count > 1 or inst.accelerator_count > 1:
            hps["sagemaker_torch_distributed_enabled"] = "true"
        kind = inst.accelerator.kind
        image = settings.image or training_image(region, kind)
        notes.append(f"image {image}" + (" (--image)" if settings.image else f" (trainctl's {kind} image table)"))
        hours = float(option.get("hours") or 1.0)
        if settings.max_runtime_hours:
            max_runtime = int(settings.max_runtime_hours * 3600)
        else:  # twice the expected billed hours and half an hour: room for a slow start, not for a hung job
            max_runtime = int(hours * 2 * 3600) + 1800
        max_runtime = max(60, min(MAX_SECONDS, max_runtime))
        stopping = {"MaxRuntimeInSeconds": max_runtime}
        bucket_prefix = f"s3://{bucket}/trainctl"
        params: dict[str, Any] = {
            "TrainingJobName": job_id,
            "RoleArn": role_arn,
            "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File",
                                       "EnableSageMakerMetricsTimeSeries": True,
                                       "MetricDefinitions": [
                                           {"Name": "train:loss", "Regex": r"trainctl step=\d+ loss=([0-9.eE+-]+)"},
                                           {"Name": "train:samples_per_s",
                                            "Regex": r"samples_per_s=([0-9.eE+-]+)"}]},
            "HyperParameters": hps,
            "OutputDataConfig": {"S3OutputPath": f"{bucket_prefix}/output"},
            "ResourceConfig": {"InstanceType": f"ml.{itype}", "InstanceCount": count, "VolumeSizeInGB": 50},
            "VpcConfig": {"SecurityGroupIds": [sg_ref], "Subnets": [subnet]},
            "StoppingCondition": stopping,
            "Environment": {"TRAINCTL_JOB_ID": job_id, "PYTHONUNBUFFERED": "1"},
            "RetryStrategy": {"MaximumRetryAttempts": 2},
            "Tags": tags(job_id, **{"trainctl:spec": spec.name}),
        }
        if market == "spot":
            wait = int(spec.constraints.max_spot_wait_hours * 3600)
            stopping["MaxWaitTimeInSeconds"] = min(MAX_SECONDS, max_runtime + wait)
            params["EnableManagedSpotTraining"] = True
            params["CheckpointConfig"] = {"S3Uri": f"{bucket_prefix}/checkpoints/{job_id}",
                                          "LocalPath": CHECKPOINT_LOCAL}
            notes.append(f"managed Spot: MaxWait {stopping['MaxWaitTimeInSeconds']} s (runtime {max_runtime} s + "
                         f"max_spot_wait_hours {spec.constraints.max_spot_wait_hours:g}); checkpoints synced to "
                         f"{params['CheckpointConfig']['S3Uri']}")
        calls.append(AwsCall("sagemaker", "CreateTrainingJob", params, region,
                             outputs={"training_job_arn": "TrainingJobArn"},
                             why=f"{count} x ml.{itype} {market}"))
        return LaunchRequest(platform="sagemaker", job_id=job_id, region=region, option=option, calls=tuple(calls),
                             notes=tuple(notes))

    # ------------------------------------------------------------------ writes
    def submit(self, request: LaunchRequest, progress: Callable[[str], None] | None = None) -> dict:
        return run_calls(request, aws.client, progress)

    def stop(self, job_id: str, region: str) -> None:
        try:
            aws.client("sagemaker", region).stop_training_job(TrainingJobName=job_id)
        except Exception as e:  # noqa: BLE001
            if _code(e) == "ValidationException":
                raise TrainctlError(f"cannot stop {job_id}: {aws.error_summary(e)}") from None
            raise

    def cleanup(self, job_id: str, region: str) -> list[str]:
        """Stop the job if it still runs, then delete the security groups tagged with it (the bucket is shared
        and code objects are shared by hash; checkpoints, model and logs are the job's output and stay)."""
        removed = []
        sm = aws.client("sagemaker", region)
        try:
            status = sm.describe_training_job(TrainingJobName=job_id)["TrainingJobStatus"]
        except Exception as e:  # noqa: BLE001
            if _code(e) not in ("ValidationException", "ResourceNotFound"):
                raise
            status = None  # never created (a launch that failed or was interrupted before CreateTrainingJob)
        if status == "InProgress":
            sm.stop_training_job(TrainingJobName=job_id)
            removed.append(f"training job {job_id} (stopping: it checkpoints, uploads its model, then ends)")
        ec2 = aws.client("ec2", region)
        groups = ec2.describe_security_groups(Filters=[{"Name": f"tag:{JOB_TAG}", "Values": [job_id]}])
        for g in groups["SecurityGroups"]:
            try:
                ec2.delete_security_group(GroupId=g["GroupId"])
                removed.append(f"security group {g['GroupId']}")
            except Exception as e:  # noqa: BLE001
                if _code(e) == "DependencyViolation":  # the job's hosts still hold network interfaces
                    raise TrainctlError(f"security group {g['GroupId']} of {job_id} is still in use by the job's "
                                        f"hosts: run `trainctl down {job_id}` again once the job has ended") from None
                if _code(e) != "InvalidGroup.NotFound":
                    raise
        return removed

    # ------------------------------------------------------------------ reads
    def describe(self, job_id: str, region: str) -> JobView:
        try:
            d = aws.client("sagemaker", region).describe_training_job(TrainingJobName=job_id)
        except Exception as e:  # noqa: BLE001
            if _code(e) in ("ValidationException", "ResourceNotFound"):
                raise TrainctlError(f"no SageMaker training job {job_id!r} in {region}") from None
            raise

        def ts(v):
            return v.timestamp() if hasattr(v, "timestamp") else v

        trans = tuple(Transition(t["Status"], ts(t.get("StartTime")), ts(t.get("EndTime")), t.get("StatusMessage", ""))
                      for t in d.get("SecondaryStatusTransitions", []))
        rc = d.get("ResourceConfig", {})
        count = rc.get("InstanceCount") or 1
        return JobView(
            job_id=job_id, platform="sagemaker", region=region, status=d["TrainingJobStatus"],
            secondary_status=d.get("SecondaryStatus"), transitions=trans,
            hosts=tuple(f"algo-{i}" for i in range(1, count + 1)),
            training_seconds=d.get("TrainingTimeInSeconds"), billable_seconds=d.get("BillableTimeInSeconds"),
            interruptions=sum(1 for t in trans if t.status == "Interrupted"),
            failure_reason=d.get("FailureReason"), instance_type=(rc.get("InstanceType") or "").removeprefix("ml.")
            or None, count=count, market="spot" if d.get("EnableManagedSpotTraining") else "on-demand",
            started_at=ts(d.get("TrainingStartTime")), ended_at=ts(d.get("TrainingEndTime")), raw=d)

    def logs(self, job_id: str, region: str, cursor: dict | None) -> tuple[list[LogLine], dict]:
        """Every host's new lines in one FilterLogEvents over the job's streams (not a call per stream)."""
        logs = aws.client("logs", region)
        cursor = dict(cursor or {"start": 0, "seen": []})
        polls = cursor.get("polls", 0)
        streams = cursor.get("streams") or []
        # Streams appear only when an attempt starts: list them again only when we may be missing
        # one (none yet, the newest attempt has fewer streams than hosts, the caller saw a status
        # change) and otherwise once every RELIST_EVERY polls; a steady poll is then one call.
        if (not streams or cursor.get("relist") or polls % RELIST_EVERY == 0
                or _newest_attempt_streams(streams) < int(cursor.get("hosts") or 1)):
            try:
                streams, token = [], None
                while True:  # one page holds 50 streams: 2 attempts x 25 hosts
                    kw = {"nextToken": token} if token else {}
                    page = logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{job_id}/", **kw)
                    streams += [s["logStreamName"] for s in page.get("logStreams", [])]
                    token = page.get("nextToken")
                    if not token:
                        break
            except Exception as e:  # noqa: BLE001
                if _code(e) == "ResourceNotFoundException":
                    return [], {**cursor, "polls": polls + 1}  # no host has logged yet
                raise
            streams = sorted(s for s in streams if s.startswith(f"{job_id}/"))
        cursor.update(polls=polls + 1, streams=streams, relist=False)
        if not streams:
            return [], cursor
        seen = set(cursor.get("seen", []))
        start = max(0, int(cursor.get("start", 0)) - LOG_LOOKBACK_MS)
        events: list[dict] = []
        for i in range(0, len(streams), 100):  # FilterLogEvents takes at most 100 stream names
            token, pages = None, 0
            while pages < MAX_LOG_PAGES:
                kw = {"nextToken": token} if token else {}
                page = logs.filter_log_events(logGroupName=LOG_GROUP, logStreamNames=streams[i:i + 100],
                                              startTime=start, **kw)
                events += page.get("events", [])
                pages += 1
                token = page.get("nextToken")
                if not token:
                    break
        lines: list[LogLine] = []
        newest = int(cursor.get("start", 0))
        for ev in sorted(events, key=lambda e: (e["timestamp"], e.get("ingestionTime", 0), e["logStreamName"])):
            eid = ev.get("eventId") or f"{ev['logStreamName']}/{ev['timestamp']}/{ev['message']}"
            if eid in seen:
                continue
            seen.add(eid)
            m = re.match(r".*/(algo-\d+)-\d+$", ev["logStreamName"])
            lines.append(LogLine(ev["timestamp"], m.group(1) if m else ev["logStreamName"].split("/")[-1],
                                 ev["message"].rstrip("\n")))
            newest = max(newest, ev["timestamp"])
        # keep only the ids inside the look-back window: the cursor stays small on long jobs
        keep = {e.get("eventId") or f"{e['logStreamName']}/{e['timestamp']}/{e['message']}" for e in events
                if e["timestamp"] >= newest - LOG_LOOKBACK_MS}
        return lines, {**cursor, "start": newest, "seen": sorted(keep & seen)}

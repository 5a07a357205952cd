"""Fail before billing: the job's `data:` channels checked at launch (and by `doctor SPEC`) before anything is
created, each problem one line with its fix.

- A bucket in another region than the job (S3 GetBucketLocation): every byte read would cross regions, billed
  per GB and slower; refused unless `launch --allow-cross-region-data` (EC2 only: SageMaker's S3DataSource reads
  only a bucket in the job's region, SageMaker API reference `S3DataSource.S3Uri`).
- A prefix that is empty, or that the caller cannot list (ListObjectsV2 with MaxKeys=1): SageMaker fails such
  a job in Downloading ("ClientError: Data download failed"), after its instances were started.
- A key that cannot be a file on the hosts (`a` beside `a/b`, a name part over 255 bytes, `..`), in the first
  page of the listing: the copy would fail on the node after it is billed.
- An FSx for Lustre file system that does not exist (fsx DescribeFileSystems: FileSystemNotFound), is not
  Lustre, or is not in the job's VPC and AZ: SageMaker reaches it only through the job's own network
  interfaces (VpcConfig), and a Lustre file system lives in one subnet.
"""
from __future__ import annotations

from dataclasses import dataclass

from trainctl.aws import clients as aws
from trainctl.errors import UsageError
from trainctl.spec.data import FsxChannel

DENIED = ("AccessDenied", "AccessDeniedException", "AllAccessDisabled", "403")
# Keys of a channel's first listing page checked at launch for names no host can write as files: one request,
# the same as the emptiness check's; a bad key further on is named by the node when it copies it.
SAMPLE_KEYS = 1000


def unmaterialisable(keys: list[str], prefix: str) -> tuple[str, str] | None:
    """The first key (and why) that cannot become a file under the channel's folder: a name component over 255
    bytes (Linux's limit), a `..` component, or a key that is also the folder of another (`a` beside `a/b`).
    Folder markers (keys ending in /) are folders, as SageMaker and the node agent treat them."""
    files, folders = {}, set()
    for key in sorted(keys):
        parts = [p for p in key[len(prefix):].split("/") if p not in ("", ".")]
        if not parts:
            continue
        if ".." in parts:
            return key, "a '..' in its name"
        if any(len(p.encode()) > 255 for p in parts):
            return key, "a part of its name is longer than 255 bytes, Linux's limit"
        if key.endswith("/"):
            folders.add("/".join(parts))
            continue
        files["/".join(parts)] = key
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
    clash = sorted(set(files) & folders)
    return (files[clash[0]], "another key uses it as a folder (keys `a` and `a/b`)") if clash else None


@dataclass(frozen=True)
class DataCheck:
    channel: str
    ok: bool
    line: str        # what was found, or what is wrong with the fix


def data_reads(data: dict | None) -> tuple[tuple[str, str], ...]:
    """(bucket, prefix) of each S3 channel: what the job's role must be able to read."""
    return tuple(sorted({(s.bucket, s.prefix) for s in (data or {}).values() if not isinstance(s, FsxChannel)}))


def bucket_region(s3, bucket: str) -> str:
    """GetBucketLocation's LocationConstraint: null is us-east-1, and the legacy `EU` is eu-west-1 (S3 API
    Reference, GetBucketLocation)."""
    where = s3.get_bucket_location(Bucket=bucket).get("LocationConstraint")
    return {None: "us-east-1", "": "us-east-1", "EU": "eu-west-1"}.get(where, where)


def check_s3(s3, name: str, source, region: str, allow_cross_region: bool, platform: str | None = None) -> DataCheck:
    where = f"data: channel {name} {source.uri}"
    try:
        home = bucket_region(s3, source.bucket)
        page = s3.list_objects_v2(Bucket=source.bucket, Prefix=source.prefix, MaxKeys=SAMPLE_KEYS)
    except Exception as e:  # noqa: BLE001
        code = aws.error_code(e)
        if code == "NoSuchBucket":
            return DataCheck(name, False, f"{where}: bucket {source.bucket} does not exist; check the name")
        if code in DENIED:
            return DataCheck(name, False, f"{where}: you cannot list it ({code}); grant s3:ListBucket and "
                                          "s3:GetBucketLocation on the bucket (trainctl iam-policy --data-bucket "
                                          f"{source.bucket}), or use a bucket you can read")
        raise
    if home != region and platform == "sagemaker":
        return DataCheck(name, False, f"{where}: the bucket is in {home}, the job in {region}; SageMaker reads input "
                                      f"only from its own region: copy the data to a bucket in {region}, launch in "
                                      f"{home}, or use --platform ec2 --allow-cross-region-data")
    if home != region and not allow_cross_region:
        return DataCheck(name, False, f"{where}: the bucket is in {home}, the job in {region}; every byte would "
                                      "be billed as cross-region transfer: copy the data to a bucket in "
                                      f"{region}, launch in {home}, or pass --allow-cross-region-data")
    if not page.get("KeyCount", len(page.get("Contents", []))):
        return DataCheck(name, False, f"{where}: no objects under the prefix; upload the data first "
                                      f"(aws s3 sync DIR {source.uri}) or fix the prefix")
    bad = unmaterialisable([o["Key"] for o in page.get("Contents", [])], source.prefix)
    if bad:
        return DataCheck(name, False, f"{where}: the object key {bad[0]!r} cannot be a file on the job's hosts "
                                      f"({bad[1]}); rename it (aws s3 mv), or point the channel at a prefix "
                                      "without it")
    cross = f", cross-region from {home} (--allow-cross-region-data)" if home != region else ""
    return DataCheck(name, True, f"{where}: readable, in {home}{cross} ({source.mode})")


def _subnets(ec2, subnet_ids) -> list[dict]:
    return ec2.describe_subnets(SubnetIds=list(subnet_ids))["Subnets"] if subnet_ids else []


def check_fsx(fsx, ec2, name: str, source: FsxChannel, job_subnets: list[str]) -> DataCheck:
    where = f"data: channel {name} {source.fsx}"
    try:
        found = fsx.describe_file_systems(FileSystemIds=[source.fsx])["FileSystems"]
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) != "FileSystemNotFound":
            raise
        found = []
    if not found:  # AWS answers FileSystemNotFound; an empty list says the same
        return DataCheck(name, False, f"{where}: no such FSx file system in this account and region; check "
                                      "the id (aws fsx describe-file-systems)")
    fs = found[0]
    if fs.get("FileSystemType") != "LUSTRE":
        return DataCheck(name, False, f"{where}: is {fs.get('FileSystemType')}, not FSx for Lustre; give a "
                                      "Lustre file system")
    mount = (fs.get("LustreConfiguration") or {}).get("MountName")
    if mount and source.path.split("/")[1] != mount:
        return DataCheck(name, False, f"{where}: path {source.path} does not start with the file system's mount "
                                      f"name /{mount}; give /{mount}/DIR")
    theirs = _subnets(ec2, fs.get("SubnetIds") or [])
    ours = _subnets(ec2, job_subnets)
    fs_azs = {s["AvailabilityZone"] for s in theirs}
    if not ours:
        return DataCheck(name, True, f"{where}: Lustre in {', '.join(sorted(fs_azs))} (give --subnet to check the "
                                     "job's VPC and AZ against it)")
    vpc, azs = ours[0]["VpcId"], {s["AvailabilityZone"] for s in ours}
    fs_vpc = theirs[0]["VpcId"] if theirs else fs.get("VpcId")  # a file system is in its subnet's VPC
    if fs_vpc != vpc:
        return DataCheck(name, False, f"{where}: is in {fs_vpc}, the job's subnets in {vpc}; launch with "
                                      f"--subnet set to a subnet of {fs_vpc} in {', '.join(sorted(fs_azs))}")
    if fs_azs and not fs_azs & azs:
        return DataCheck(name, False, f"{where}: is in {', '.join(sorted(fs_azs))}, the job in "
                                      f"{', '.join(sorted(azs))}; launch with --subnet "
                                      f"{','.join(s['SubnetId'] for s in theirs)} or a subnet in its AZ")
    return DataCheck(name, True, f"{where}: Lustre in the job's VPC {vpc} and AZ {', '.join(sorted(fs_azs))}")


def checks(client_for, region: str, data: dict | None, job_subnets: list[str] | tuple = (),
           allow_cross_region: bool = False, platform: str | None = None) -> list[DataCheck]:
    """One DataCheck per channel, in name order."""
    out = []
    for name, source in sorted((data or {}).items()):
        if isinstance(source, FsxChannel):
            out.append(check_fsx(client_for("fsx", region), client_for("ec2", region), name, source,
                                 list(job_subnets)))
        else:
            out.append(check_s3(client_for("s3", region), name, source, region, allow_cross_region, platform))
    return out


def boundary_checks(client_for, region: str, data: dict | None) -> list[DataCheck]:
    """`doctor SPEC`: whether trainctl's permissions boundary admits the data buckets (launch_limits.boundary), as
    the launch checks before it makes a role."""
    from trainctl.backends.launch_limits import boundary
    from trainctl.errors import TrainctlError

    reads = data_reads(data)
    if not reads:
        return []
    notes: list[str] = []
    try:
        account = client_for("sts", region).get_caller_identity()["Account"]
        boundary(client_for("iam", region), account, region, notes, reads=reads)
    except TrainctlError as e:
        return [DataCheck("boundary", False, str(e))]
    return [DataCheck("boundary", True, notes[-1])]


def refuse_bad_data(client_for, region: str, spec, opts, job_subnets, notes: list[str], platform: str) -> None:
    """The launch's hook: the first failing channel is refused in one line; the others' lines become notes."""
    allow = bool(getattr(opts, "allow_cross_region_data", False))  # an EC2 option only
    for check in checks(client_for, region, spec.data, job_subnets, allow, platform):
        if not check.ok:
            raise UsageError(check.line)
        notes.append(check.line)

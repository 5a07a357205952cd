"""The EC2 side of a job's `data:` channels: what the node agent is told to fetch or mount (bootstrap/channels.py
and bootstrap/fsx.py do it on the node) and which S3 prefixes the nodes' role must read.

Each S3 channel becomes {"bucket", "prefix", "mode"} in the agent's config: `copy` and `sharded` are copied to
/opt/ml/input/data/NAME before torchrun starts (`sharded`: the node's share of the sorted keys, by its rank, as
SageMaker's ShardedByS3Key gives each instance 1/N of the objects); `stream` is mounted with Mountpoint for
Amazon S3 where the node has `mount-s3`, its throughput capped at what the plan leaves the data, and copied
otherwise (the agent logs which).

An FSx for Lustre channel becomes {"mode": "mount", "fsx", "dns_name", "mount_name", "path"}: the node mounts
DNSNAME@tcp:/MOUNTNAME/DIR read-only at /opt/ml/input/data/NAME. The launch reads the DNS and mount names with
DescribeFileSystems (its data checks already found the file system), so the nodes' role needs no FSx permission.
"""
from __future__ import annotations

from trainctl.backends.data_checks import data_reads  # noqa: F401 (the nodes' role reads these)
from trainctl.backends import lustre_network
from trainctl.backends.lustre_network import lustre_ingress  # noqa: F401 (prepare adds these to the group)
from trainctl.errors import UsageError
from trainctl.spec.data import FsxChannel


def fsx_mount(client_for, region: str, name: str, source: FsxChannel, subnets, user_group: str | None) -> dict:
    """The agent's settings for one FSx channel, from the file system's description; refused (UsageError) when
    the security groups keep Lustre out (lustre_network.py)."""
    found = client_for("fsx", region).describe_file_systems(FileSystemIds=[source.fsx])["FileSystems"]
    lustre = (found[0].get("LustreConfiguration") or {}) if found else {}
    if not found or not found[0].get("DNSName") or not lustre.get("MountName"):
        raise UsageError(f"data: channel {name} {source.fsx}: DescribeFileSystems gives no DNS name and mount name "
                         "for it, which its nodes need to mount it; check that the file system is AVAILABLE "
                         "(aws fsx describe-file-systems)")
    ec2 = client_for("ec2", region)
    groups = lustre_network.file_system_groups(ec2, found[0])
    lustre_network.refuse_unreachable(ec2, name, source.fsx, groups, list(subnets), user_group)
    # the groups: the job's own group lets them in (lustre_network.lustre_ingress); the agent names them if the
    # mount fails
    return {"mode": "mount", "fsx": source.fsx, "dns_name": found[0]["DNSName"], "mount_name": lustre["MountName"],
            "path": source.path, "security_groups": groups}


def fsx_zones(client_for, region: str, data: dict | None, notes: list[str], azs: list[str]) -> list[str]:
    """With FSx channels, only the AZs of their file systems, when the job has subnets there: a Lustre file
    system lives in one subnet (one AZ), and nodes elsewhere would pay cross-AZ traffic (the data checks refuse
    them). Otherwise `azs` as they are, and the checks say what is wrong."""
    ids = sorted({s.fsx for s in (data or {}).values() if isinstance(s, FsxChannel)})
    if not ids or not azs:
        return azs
    try:
        found = client_for("fsx", region).describe_file_systems(FileSystemIds=ids)["FileSystems"]
    except Exception:  # noqa: BLE001 - an unknown id: the data checks refuse it in their own words
        return azs
    subnets = sorted({s for fs in found for s in fs.get("SubnetIds", [])})
    zones = {s["AvailabilityZone"] for s in client_for("ec2", region).describe_subnets(SubnetIds=subnets)["Subnets"]
             } if subnets else set()
    kept = [az for az in azs if az in zones]
    if kept and kept != azs:
        notes.append(f"AZ {', '.join(kept)} only: the FSx file system {', '.join(ids)} is there")
    return kept or azs


def node_channels(data: dict | None, client_for=None, region: str = "", subnets=(), user_group: str | None = None,
                  option=None, notes: list[str] | None = None) -> dict:
    """The agent config's `channels` member. An FSx channel is described with client_for (fsx and ec2). A `stream`
    channel carries the plan's cap for mount-s3 (`max_gbps`): the link's baseline less the gradients' share, so
    that streamed reads leave the all-reduce the bandwidth the plan gave it."""
    channels = {}
    cap = getattr(getattr(option, "data", None), "stream_cap_gbps", None)
    for name, source in sorted((data or {}).items()):
        if isinstance(source, FsxChannel):
            channels[name] = fsx_mount(client_for, region, name, source, subnets, user_group)
            continue
        channels[name] = {"bucket": source.bucket, "prefix": source.prefix, "mode": source.mode}
        if source.mode == "stream" and cap:
            channels[name]["max_gbps"] = cap
        if source.mode == "stream" and notes is not None:
            notes.append(f"channel {name}: mount-s3 --maximum-throughput-gbps {cap} per node (the plan's link "
                         "baseline less the gradients' share)" if cap else
                         f"channel {name}: mount-s3 at its default throughput, the instance's whole bandwidth: the "
                         f"plan could not size the stream (give data.{name}.bytes_per_sample)")
    return {"channels": channels} if channels else {}


def channel_notes(channels: dict) -> list[str]:
    """What `launch --dry-run` shows of each FSx channel: the mount each node runs."""
    from trainctl.bootstrap.fsx import mount_command
    from trainctl.spec.data import channel_path

    return [f"channel {name}: FSx for Lustre {channel['fsx']}, on each node: "
            + " ".join(mount_command(channel, channel_path(name)))
            for name, channel in sorted(channels.items()) if channel["mode"] == "mount"]

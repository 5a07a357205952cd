"""FSx for Lustre file systems that instances can mount, where moto stops at the record.

- A Lustre file system gets what AWS gives it and moto does not: `LustreConfiguration.MountName` ("fsx" for
  SCRATCH_1, otherwise a name of 8 lower-case letters and digits; FSx API Reference,
  `LustreFileSystemConfiguration.MountName`), `Lifecycle` AVAILABLE and its `VpcId` (its subnet's).
- Its content is a folder of the sandbox's (WORKDIR/fsx/ID), filled when it is created from the objects under
  `LustreConfiguration.ImportPath` (an S3 data repository: the file system presents the objects under the prefix
  as files, FSx for Lustre User Guide, "Linking your file system to an Amazon S3 bucket"; objects added to the
  bucket later are not imported, as with AutoImportPolicy NONE). Without an ImportPath it is empty.
- Its network interface (moto makes none) in its subnet carries its security groups (the VPC's default group when
  the request names none); CreateFileSystem refuses groups that let no Lustre traffic (TCP 988 and 1018-1023)
  in between the file servers themselves (InvalidNetworkSettings, FSx for Lustre User Guide, "Creating an FSx for
  Lustre file system fails"), and an ImportPath whose bucket cannot be read (InvalidImportPath).
- An instance mounts it as on AWS, `mount -t lustre -o OPTIONS DNSNAME@tcp:/MOUNTNAME[/DIR] MOUNTPOINT`: the
  sandbox's node has `mount` and `mount.lustre` on its PATH (the Lustre client of its AMI, nodes.py), which ask
  the sandbox (`mount_lustre`). It refuses what Lustre refuses: a DNS name that is no file system of the
  instance's region, a file system outside the instance's VPC or kept out by the security groups (the file
  system's must let the instance in on TCP 988 and 1018-1023, the instance's the file system's), a wrong mount
  name (the file system name), a directory that does not exist, a mount point that is not an empty directory. Otherwise the mount point
  becomes a view of the folder (a symlink): read-only on AWS with `-o ro`; here the folder's files are made
  read-only by permission, which a root process can still bypass.
"""
from __future__ import annotations

import ipaddress
import os
import random
import shutil
import string
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from trainctl_sandbox.server.context import SandboxContext

LUSTRE_PORTS = ((988, 988), (1018, 1023))  # FSx for Lustre User Guide, "File system access control with Amazon VPC"

MOUNT_SCRIPT = """#!{python}
# `mount` and `mount.lustre` inside sandbox instance {instance}: a Lustre mount asks the sandbox (its FSx);
# any other mount is the system's.
import json, os, sys, urllib.error, urllib.request
args = sys.argv[1:]
kind = "lustre" if os.path.basename(sys.argv[0]) == "mount.lustre" else None
options, rest, i = "", [], 0
while i < len(args):
    if args[i] in ("-t", "-o") and i + 1 < len(args):
        kind, options = (args[i + 1], options) if args[i] == "-t" else (kind, args[i + 1])
        i += 2
        continue
    rest.append(args[i])
    i += 1
if kind != "lustre":
    real = next((p for p in ("/usr/bin/mount", "/bin/mount") if os.path.exists(p)), "mount")
    os.execv(real, [real, *args])
if len(rest) != 2:
    print("usage: mount -t lustre [-o OPTIONS] MGSNAME:/FSNAME[/SUBDIR] MOUNTPOINT", file=sys.stderr)
    sys.exit(1)
body = json.dumps({{"instance_id": "{instance}", "source": rest[0], "target": os.path.abspath(rest[1]),
                   "options": options}}).encode()
req = urllib.request.Request("{endpoint}/_trainctl/admin/mount_lustre", data=body, method="POST",
                             headers={{"Content-Type": "application/json"}})
try:
    urllib.request.urlopen(req, timeout=30).read()
except urllib.error.HTTPError as e:
    print(json.loads(e.read() or b"{{}}").get("error", str(e)), file=sys.stderr)
    sys.exit(32)
except Exception as e:
    print(f"mount.lustre: {{e}}", file=sys.stderr)
    sys.exit(32)
"""


def folder(ctx: SandboxContext, fs_id: str) -> Path:
    return Path(ctx.workdir) / "fsx" / fs_id


def _mount_name(fs_id: str, deployment: str | None) -> str:
    if deployment == "SCRATCH_1":
        return "fsx"
    return "".join(random.Random(fs_id).choices(string.ascii_lowercase + string.digits, k=8))


def _import(ctx: SandboxContext, account: str, region: str, fs_id: str, import_path: str | None) -> None:
    """The objects under the ImportPath as the file system's files, read-only."""
    from trainctl_sandbox.server.moto_s3 import MotoS3, parse_s3_uri

    root = folder(ctx, fs_id)
    root.mkdir(parents=True, exist_ok=True)
    if import_path:
        from moto.fsx.exceptions import JsonRESTError

        s3 = MotoS3(account, region)
        bucket, prefix = parse_s3_uri(import_path)
        try:
            keys = s3.keys(bucket, prefix)
        except Exception as e:  # no such bucket
            raise JsonRESTError("InvalidImportPath", f"The import path {import_path} cannot be read: {e}") from e
        for key in keys:
            rel = key[len(prefix):].lstrip("/")
            if not rel or rel.endswith("/") or ".." in rel.split("/"):
                continue
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(s3.get(bucket, key))
            path.chmod(0o444)
    for sub in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        sub.chmod(0o555)


def lets_lustre_in(ec2: Any, group_ids: list[str], ips: list[str], sources: set[str]) -> bool:
    """Whether the groups' inbound rules let TCP 988 and 1018-1023 in from the addresses or the source groups.
    A VPC's default group also lets in all traffic from its own members (Amazon VPC User Guide, "Default security
    groups for your VPCs"), a rule moto does not make."""
    groups = [g for g in map(ec2.get_security_group_from_id, group_ids) if g is not None]
    rules = [r for g in groups for r in g.ingress_rules]
    rules += [SimpleNamespace(ip_protocol="-1", ip_range={}, source_group={"GroupId": g.id}) for g in groups
              if g.is_default]

    def lets(rule: Any, lo: int, hi: int) -> bool:
        ports = rule.ip_protocol == "-1" or (rule.ip_protocol == "tcp" and rule.from_port <= lo and hi <= rule.to_port)
        cidr = rule.ip_range.get("CidrIp")
        source = rule.source_group.get("GroupId") in sources or (
            cidr is not None and any(ipaddress.ip_address(ip) in ipaddress.ip_network(cidr) for ip in ips))
        return ports and source

    return all(any(lets(r, lo, hi) for r in rules) for lo, hi in LUSTRE_PORTS)


def _network(ec2: Any, fs: Any, subnet: Any) -> None:
    """The file system's network interface in its subnet with its groups (the VPC's default group when the
    request names none); AWS refuses a file system whose groups let no Lustre traffic in between its servers."""
    from moto.fsx.exceptions import JsonRESTError

    groups = list(fs.security_group_ids or [ec2.get_default_security_group(subnet.vpc_id).id])
    if not lets_lustre_in(ec2, groups, [], set(groups)):
        raise JsonRESTError("InvalidNetworkSettings", "The file system cannot be created because the default security "
                            "group in the subnet provided or the provided security groups do not permit Lustre LNET "
                            "network traffic on port 988")
    eni = ec2.create_network_interface(subnet, None, group_ids=groups,
                                       description=f"ENI for FSx {fs.file_system_id}")
    fs.vpc_id, fs.network_interface_ids = subnet.vpc_id, [eni.id]


def install(ctx: SandboxContext) -> None:
    from moto.ec2.models import ec2_backends
    from moto.fsx.models import FileSystem, FSxBackend

    create = getattr(FSxBackend.create_file_system, "trainctl_plain", FSxBackend.create_file_system)
    to_dict = getattr(FileSystem.to_dict, "trainctl_plain", FileSystem.to_dict)

    def create_file_system(self, *args, **kwargs):
        ec2 = ec2_backends[self.account_id][self.region_name]
        fs = create(self, *args, **kwargs)
        try:
            if fs.subnet_ids:
                _network(ec2, fs, ec2.get_subnet(fs.subnet_ids[0]))
            if fs.file_system_type == "LUSTRE":
                lustre = dict(fs.lustre_configuration or {})
                lustre.setdefault("MountName", _mount_name(fs.file_system_id, lustre.get("DeploymentType")))
                fs.lustre_configuration = lustre
                _import(ctx, self.account_id, self.region_name, fs.file_system_id, lustre.get("ImportPath"))
        except Exception:
            self.file_systems.pop(fs.file_system_id, None)  # refused: no file system
            raise
        return fs

    def described(self) -> dict[str, Any]:
        out = to_dict(self)
        out.pop("SecurityGroupIds", None)  # a request member only: AWS's FileSystem has no such field
        net = {"VpcId": getattr(self, "vpc_id", None),
               "NetworkInterfaceIds": getattr(self, "network_interface_ids", None)}
        return {**out, "Lifecycle": "AVAILABLE", **{k: v for k, v in net.items() if v}}

    create_file_system.trainctl_plain, described.trainctl_plain = create, to_dict
    FSxBackend.create_file_system, FileSystem.to_dict = create_file_system, described


def reset(ctx: SandboxContext) -> None:
    """The file systems' folders go with moto's records; their read-only folders are made writable first, or a
    process that is not root could not remove them."""
    target = Path(ctx.workdir) / "fsx"
    for path in [target, *target.rglob("*")] if target.exists() else []:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(target, ignore_errors=True)


def shutdown(ctx: SandboxContext) -> None:
    reset(ctx)  # before the server removes its folder


def helpers(ctx: SandboxContext, bin_dir: Path, instance_id: str) -> None:
    """The node's Lustre client: `mount` and `mount.lustre` on its PATH."""
    script = bin_dir / "mount"
    script.write_text(MOUNT_SCRIPT.format(python=sys.executable, instance=instance_id, endpoint=ctx.endpoint_url))
    script.chmod(0o755)
    (bin_dir / "mount.lustre").symlink_to(script)


def _file_system(ctx: SandboxContext, region: str, host: str) -> Any:
    from moto.fsx.models import fsx_backends

    return next((fs for fs in fsx_backends[ctx.account_id][region].file_systems.values()
                 if fs.dns_name == host and fs.file_system_type == "LUSTRE"), None)


def _blocked(ec2: Any, instance: Any, fs: Any) -> str | None:
    """Why the security groups keep Lustre out between the instance and the file system, or None: the file
    system's groups must let the instance in, the instance's let the file system's in (both on TCP 988 and
    1018-1023)."""
    mine = sorted({g.id for nic in instance.nics.values() for g in nic.group_set})
    return blocked_between(ec2, fs, mine, [nic.private_ip_address for nic in instance.nics.values()], "the instance")


def blocked_between(ec2: Any, fs: Any, groups: list[str], ips: list[str], who: str) -> str | None:
    """The same rule for any Lustre client: its security groups and addresses (an instance's, or a SageMaker job's
    network interfaces in its VpcConfig subnets) against the file system's groups."""
    enis = [ec2.get_network_interface(i) for i in getattr(fs, "network_interface_ids", None) or []]
    fs_groups = sorted({g.id for eni in enis for g in eni.group_set})
    if fs_groups and not lets_lustre_in(ec2, fs_groups, ips, set(groups)):
        return f"the file system's groups {', '.join(fs_groups)} let no Lustre traffic in from {who}"
    fs_ips = [eni.private_ip_address for eni in enis]
    if fs_groups and not lets_lustre_in(ec2, groups, fs_ips, set(fs_groups)):
        return f"{who}'s groups {', '.join(groups)} let no Lustre traffic in from the file system"
    return None


def mount_lustre(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """{instance_id, source: DNSNAME@tcp:/MOUNTNAME[/DIR], target, options}: mounted, or ValueError with
    mount.lustre's message."""
    from trainctl_sandbox.ec2 import imds

    found = imds._find(ctx, payload["instance_id"])
    if found is None:
        raise ValueError(f"no instance {payload['instance_id']}")
    backend, instance = found
    from trainctl_sandbox.ec2.node_paths import on_machine

    source, target = str(payload["source"]), on_machine(ctx, instance.id, Path(payload["target"]))
    nid, _, path = source.partition(":/")
    host, _, net = nid.partition("@")
    failed = f"mount.lustre: mount {source} at {payload['target']} failed:"
    if net != "tcp" or not path:
        raise ValueError(f"mount.lustre: can't parse {source!r}: expected MGSNAME@tcp:/FSNAME[/SUBDIR]")
    fs = _file_system(ctx, backend.region_name, host)
    if fs is None:
        raise ValueError(f"mount.lustre: Can't parse NID '{nid}': {host} does not resolve (no FSx for Lustre file "
                         f"system has this DNS name in {backend.region_name})")
    if getattr(fs, "vpc_id", None) and fs.vpc_id != instance.vpc_id:
        raise ValueError(f"{failed} Input/output error (the file system is in {fs.vpc_id}, the instance in "
                         f"{instance.vpc_id}: unreachable) Is the MGS running?")
    why = _blocked(backend, instance, fs)
    if why:
        raise ValueError(f"{failed} Connection timed out ({why}) Is the MGS running?")
    fsname, _, subdir = path.partition("/")
    if fsname != (fs.lustre_configuration or {}).get("MountName"):
        raise ValueError(f"{failed} No such file or directory Is the MGS specification correct? "
                         "Is the filesystem name correct?")
    root = folder(ctx, fs.file_system_id)
    view = (root / subdir).resolve() if subdir.strip("/") else root
    if not view.is_dir() or os.path.commonpath([view, root.resolve()]) != str(root.resolve()):
        raise ValueError(f"{failed} No such file or directory (no directory /{subdir.strip('/')} on the file system)")
    node_root = Path(ctx.workdir) / "ec2" / instance.id
    if os.path.commonpath([target.resolve(), node_root.resolve()]) != str(node_root.resolve()):
        raise ValueError(f"mount.lustre: mount point {payload['target']} is not on this instance")
    if not target.is_dir() or target.is_symlink() or any(target.iterdir()):
        raise ValueError(f"mount.lustre: mount point {payload['target']} is not an empty directory")
    target.rmdir()
    target.symlink_to(view, target_is_directory=True)
    return {"mounted": str(payload["target"]), "file_system": fs.file_system_id, "options": payload.get("options", "")}


ADMIN_ACTIONS = {"mount_lustre": mount_lustre}

"""Mountpoint for Amazon S3 (`mount-s3`) on a sandbox instance, where the sandbox is told the image has it.

Our sources do not say which DLAMIs ship mount-s3, so a node has none unless `configure_instances(mount_s3=True)`
says so (the node agent then copies a `stream` channel, and says it). The stand-in takes the real tool's command
line, `mount-s3 [OPTIONS] <BUCKET_NAME> <DIRECTORY>`, and refuses what the real one refuses:
- a `--prefix` that does not end in '/': the real tool parses it as a `Prefix` ("A prefix string ending in `/`, or
  the empty string"; awslabs/mountpoint-s3, mountpoint-s3-fs/src/prefix.rs, `PrefixError::MissingFinalDelimiter`
  "prefix must end in '/'"), so its argument parser stops with `error: invalid value 'X' for '--prefix <PREFIX>':
  prefix must end in '/'` and exit status 2, and nothing is mounted (`mount-s3 --help`: "Prefix inside the bucket
  to mount, ending in '/'");
- a `--maximum-throughput-gbps` that is not a whole number (the option is an integer);
- a bucket the node's credentials cannot list (exit 1, nothing mounted).
Otherwise the objects under the prefix become read-only files under DIRECTORY, named by their key past the prefix
(the real tool serves them through FUSE as they are read; here they are fetched at mount time) and it exits 0, as
the real tool does once its daemon has mounted.
"""
from __future__ import annotations

import sys
from pathlib import Path

MOUNT_S3 = """#!{python}
# `mount-s3` inside sandbox instance {instance}: Mountpoint for Amazon S3's command line (ec2/mountpoint.py).
import os, stat, sys
args, opts, rest, i = sys.argv[1:], {{}}, [], 0
flags = ("--read-only", "--allow-delete", "--allow-overwrite", "--auto-unmount", "--allow-root", "--allow-other",
         "-f", "--foreground", "--force-path-style")
while i < len(args):
    if args[i] in flags:
        i += 1
    elif args[i].startswith("--"):
        opts[args[i]] = args[i + 1] if i + 1 < len(args) else ""
        i += 2
    else:
        rest.append(args[i])
        i += 1
prefix = opts.get("--prefix", "")
if prefix and not prefix.endswith("/"):
    print(f"error: invalid value '{{prefix}}' for '--prefix <PREFIX>': prefix must end in '/'", file=sys.stderr)
    sys.exit(2)
gbps = opts.get("--maximum-throughput-gbps")
if gbps is not None and not gbps.isdigit():
    print(f"error: invalid value '{{gbps}}' for '--maximum-throughput-gbps <N>': invalid digit found in string",
          file=sys.stderr)
    sys.exit(2)
if len(rest) != 2:
    print("error: the following required arguments were not provided: <BUCKET_NAME> <DIRECTORY>", file=sys.stderr)
    sys.exit(2)
bucket, directory = rest
import boto3
s3 = boto3.client("s3")
try:
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in page.get("Contents", [])]
except Exception as e:
    print(f"Error: Failed to create S3 client: {{e}}", file=sys.stderr)
    sys.exit(1)
for key in keys:
    name = key[len(prefix):]
    if not name or name.endswith("/"):
        continue
    path = os.path.join(directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    s3.download_file(bucket, key, path)
    os.chmod(path, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
print(f"bucket {{bucket}} is mounted at {{directory}}")
"""


def install(bin_dir: Path, instance_id: str) -> None:
    """The node's `mount-s3` (its image has Mountpoint for Amazon S3)."""
    tool = bin_dir / "mount-s3"
    tool.write_text(MOUNT_S3.format(python=sys.executable, instance=instance_id))
    tool.chmod(0o755)

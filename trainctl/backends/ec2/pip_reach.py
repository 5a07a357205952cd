"""Whether EC2 nodes can pip-install the job's requirements.txt, checked at launch before anything is created.

The node agent runs `pip install -r requirements.txt` in the job's code before the script (bootstrap/node_io.py), as
SageMaker's training toolkit does. pip's default index (PyPI) is on the internet. A node reaches the internet only
through a NAT gateway, or with a public IPv4 address and a route to an internet gateway (VPC User Guide, "Connect to
the internet using an internet gateway" and "NAT gateways"); VPC endpoints reach AWS services only (AWS PrivateLink
guide). So a subnet with endpoints but no NAT lets the agent start and fail at pip, billed.

Two ways need no internet, and trainctl takes them as the user's word: requirements.txt names its own index
(`--index-url`/`-i`, e.g. a CodeArtifact repository reached through its VPC endpoints), or installs offline
(`--no-index` with `--find-links` to wheels shipped in the code).
"""
from __future__ import annotations

import io
import shlex
import tarfile

from trainctl.aws import network
from trainctl.errors import UsageError

REQUIREMENTS = "requirements.txt"


def requirements_text(pkg) -> str | None:
    """The shipped requirements.txt (None: the job ships none), read from the code archive itself."""
    if REQUIREMENTS not in pkg.files:
        return None
    with tarfile.open(fileobj=io.BytesIO(pkg.data), mode="r:gz") as tar:
        member = tar.extractfile(REQUIREMENTS)
        return member.read().decode("utf-8", "replace") if member else ""


def index_of(text: str) -> str | None:
    """What pip installs from when it is not PyPI: 'offline' (--no-index) or the index URL the file names."""
    words = [w for line in text.splitlines() for w in shlex.split(line.split(" #")[0], comments=True)]
    if "--no-index" in words:
        return "offline"
    for i, word in enumerate(words):
        if word in ("-i", "--index-url") and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--index-url="):
            return word.split("=", 1)[1]
    return None


def subnets_for_pip(ec2, region: str, instance_type: str, net: network.JobNetwork, public_ipv4: bool, pkg,
                    notes: list[str]) -> network.JobNetwork:
    """`net` cut to the subnets whose nodes reach PyPI when the job ships a requirements.txt that needs it; one line
    naming the fixes when none does."""
    text = requirements_text(pkg)
    if text is None:
        return net
    index = index_of(text)
    if index is not None:
        notes.append(f"requirements.txt installs {'offline (--no-index)' if index == 'offline' else 'from ' + index}"
                     ": trainctl does not check that the nodes reach it")
        return net
    kept: dict[str, tuple[str, ...]] = {}
    blocked = ""
    for az, subnets in net.by_az.items():
        ok = []
        for sid in subnets:
            route = network.private_route(ec2, region, sid, net.vpc_id)
            if route.nat or (public_ipv4 and sid in net.public_ipv4 and route.internet_gateway):
                ok.append(sid)
            else:
                blocked = blocked or sid
        if ok:
            kept[az] = tuple(ok)
    if not kept:
        how = "" if public_ipv4 else f" ({instance_type} nodes get no public IPv4)"
        raise UsageError(
            f"the job ships requirements.txt, which its EC2 nodes pip-install from PyPI, but subnet {blocked} reaches "
            f"AWS through VPC endpoints only, with no NAT route{how}: add a NAT gateway route (or pass --subnet with "
            "one), or name a mirror the VPC reaches at the top of requirements.txt (--index-url, e.g. a CodeArtifact "
            "repository with its VPC endpoints), or ship wheels (pip download -d wheels -r requirements.txt) and "
            "install offline (--no-index --find-links wheels)")
    if kept != dict(net.by_az):
        notes.append("requirements.txt shipped: only subnets with a route to the internet (pip reaches PyPI): "
                     + ", ".join(s for ids in kept.values() for s in ids))
    return network.JobNetwork(net.vpc_id, kept, net.given, net.public_ipv4)

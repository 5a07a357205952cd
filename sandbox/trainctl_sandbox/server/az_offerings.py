"""Instance-type offerings per availability zone that moto's data lacks, as AWS publishes them.

moto's own table (scraped from EC2 DescribeInstanceTypeOfferings by AZ id) has no P3 at all, so the sandbox offered
no p3 in any AZ, and no EC2 p3 launch could even be tried. These rows fill that gap in every region the source
has rows for, for the catalog's types moto lacks, and nothing else.

Source: SkyPilot's AWS catalog, `skypilot-org/skypilot-catalog` catalogs/v7/aws/vms.csv (commit 001367d2, read
2026-11-28), whose AvailabilityZone column holds AZ **ids** (use1-az1, ...): one row per type and AZ id that offers it.
AZ ids name the same physical zone in every account; AZ names (us-east-1a, ...) map to ids per account on AWS
("AZ IDs for your AWS resources", AWS RAM User Guide), here through the sandbox's own DescribeAvailabilityZones table
(ec2_data.zones). Cross-check of the same source against moto for types both have: p3dn.24xlarge (use1-az1/az6,
usw2-az1/az3) and p5.48xlarge (every AZ of both regions) agree; p4d.24xlarge differs (moto also offers use1-az4 and
usw2-az4), and moto's rows are kept for it.
"""
from __future__ import annotations

SOURCE = "skypilot-org/skypilot-catalog catalogs/v7/aws/vms.csv @ 001367d2, read 2026-11-28"

_P3 = {  # p3.2xlarge and p3.8xlarge: the same AZ ids in the source
    "ap-northeast-1": ("apne1-az1", "apne1-az4"), "ap-northeast-2": ("apne2-az1", "apne2-az3"),
    "ap-southeast-1": ("apse1-az1", "apse1-az2"), "ap-southeast-2": ("apse2-az1",), "ca-central-1": ("cac1-az2",),
    "eu-central-1": ("euc1-az2", "euc1-az3"), "eu-west-1": ("euw1-az2", "euw1-az3"),
    "eu-west-2": ("euw2-az1", "euw2-az2", "euw2-az3"),
    "us-east-1": ("use1-az1", "use1-az2", "use1-az3", "use1-az4", "use1-az5", "use1-az6"),
    "us-east-2": ("use2-az1", "use2-az2", "use2-az3"), "us-west-2": ("usw2-az1", "usw2-az2", "usw2-az3", "usw2-az4"),
}
# p3.16xlarge: as read (the rows of ap-northeast-1 and -2 were not: those regions keep none, as moto had)
_P3_16 = {region: _P3[region] for region in _P3 if not region.startswith("ap-northeast")}

# instance type -> region -> AZ ids that offer it
BY_AZ_ID: dict[str, dict[str, tuple[str, ...]]] = {"p3.2xlarge": _P3, "p3.8xlarge": _P3, "p3.16xlarge": _P3_16}

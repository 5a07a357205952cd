"""Pure arithmetic of a job's input data on the network: how long a copy from S3 takes, what streaming adds to a
node's link, and what crossing a region costs. The planner turns these into an option's terms
(planner/data_terms.py); the reasoning is in docs/cost-model.md, "Input data".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from trainctl.catalog import InstanceType
from trainctl.perf.network import BURST_MINUTES, TCP_LINK_EFFICIENCY

# S3 User Guide, "Best practices design patterns: optimizing Amazon S3 performance"
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html): "at least ... 5,500
# GET/HEAD requests per second per partitioned Amazon S3 prefix"; a new prefix starts at one partition, and S3
# splits it only after sustained load (30 to 60 minutes, AWS re:Post), so a job's prefix is taken at one partition.
S3_GETS_PER_PREFIX_PER_S = 5500.0
# Same guide, "Performance guidelines": an instance reaches "up to 100 Gb/s" to S3 with enough parallel
# connections (its own NIC permitting).
S3_GBPS_PER_INSTANCE = 100.0
# EC2 User Guide, "Amazon EC2 instance network bandwidth" (multi-flow traffic): within the Region an instance may use
# its full bandwidth; to other Regions up to 50% of it with at least 32 vCPUs, else at most 5 Gbps.
CROSS_REGION_SHARE = 0.5
CROSS_REGION_MIN_VCPUS = 32
CROSS_REGION_SMALL_GBPS = 5.0
# A parallel download over many TCP connections: taken at the same share of the line rate as NCCL's sockets
# (perf/network.py, ASSUMED ~70%).
S3_LINK_EFFICIENCY = TCP_LINK_EFFICIENCY
# Amazon S3 pricing (https://aws.amazon.com/s3/pricing/, "Data transfer", S3 Standard, checked 2026-11-25):
# transfer from S3 to EC2 in the same Region is free; "Data Transfer OUT From Amazon S3 To ... other AWS Regions"
# is $0.02/GB from the US (N. Virginia, Ohio, Oregon, N. California), Canada and the EU Regions. Regions whose rate is
# not in this table are not priced (the plan says so) rather than guessed.
INTER_REGION_USD_PER_GB = {"us-east-1": 0.02, "us-east-2": 0.02, "us-west-1": 0.02, "us-west-2": 0.02,
                           "ca-central-1": 0.02, "eu-west-1": 0.02, "eu-west-2": 0.02, "eu-west-3": 0.02,
                           "eu-central-1": 0.02, "eu-north-1": 0.02}
# Same page, "Requests & data retrievals", S3 Standard in us-east-1: GET $0.0004 per 1,000 requests (ASSUMED the
# same in other Regions; most US and EU Regions list the same rate).
S3_GET_USD_PER_REQUEST = 0.0004 / 1000.0
GB = 1e9
# Mountpoint for Amazon S3 targets the instance's whole network bandwidth unless told otherwise, with
# `--maximum-throughput-gbps`, "a value in gigabits-per-second (Gbps)" (awslabs/mountpoint-s3 doc/CONFIGURATION.md);
# the flag takes a whole number, at least 1 (mountpoint-s3/src/cli.rs: value_parser u64, range 1..).
MOUNT_S3_MIN_GBPS = 1


@dataclass(frozen=True)
class S3Link:
    """A node's link as its S3 traffic sees it, in bytes/s of payload."""

    burst_bytes_s: float
    baseline_bytes_s: float
    up_to: bool          # burst credits: burst for BURST_MINUTES on a fresh instance, then the baseline
    words: str


def s3_link(inst: InstanceType, cross_region: bool) -> S3Link:
    """The node's network toward S3: its primary card's bandwidth (as perf/network.py takes TCP traffic), at most
    S3's per-instance rate, and on a read from another Region at most what EC2 allows toward other Regions."""
    cards = max(1, inst.efa_interfaces)
    burst, base = inst.network_gbps_burst / cards, inst.network_gbps_baseline / cards
    cap, why = S3_GBPS_PER_INSTANCE, "S3's per-instance rate"
    if cross_region:
        cross = inst.network_gbps_burst * CROSS_REGION_SHARE if inst.vcpus >= CROSS_REGION_MIN_VCPUS \
            else CROSS_REGION_SMALL_GBPS
        if cross < cap:
            cap, why = cross, "EC2's limit toward another Region"
    burst, base = min(burst, cap), min(base, cap)
    up_to = inst.network_up_to and burst > base
    words = f"{burst:g} Gbps burst, then {base:g} Gbps" if up_to else f"{base:g} Gbps"
    if base >= cap:
        words += f" ({why})"
    return S3Link(burst * S3_LINK_EFFICIENCY * GB / 8, base * S3_LINK_EFFICIENCY * GB / 8, up_to, words)


def transfer_seconds(size_bytes: float, link: S3Link, burst_seconds: float) -> tuple[float, float]:
    """(seconds to move `size_bytes`, burst seconds it spent): at burst while credits last, then at baseline."""
    if not link.up_to or burst_seconds <= 0:
        return size_bytes / link.baseline_bytes_s, 0.0
    at_burst = link.burst_bytes_s * burst_seconds
    if size_bytes <= at_burst:
        seconds = size_bytes / link.burst_bytes_s
        return seconds, seconds
    return burst_seconds + (size_bytes - at_burst) / link.baseline_bytes_s, burst_seconds


@dataclass(frozen=True)
class CopyTime:
    start_s: float          # every node copying its part at start, together
    replacement_s: float    # one fresh node re-copying its part alone
    burst_s_used: float     # burst credits the start copy spent (none left for training when = the window)
    bound: str              # what sets the start copy's pace: "network" | "S3 requests"


def copy_time(size_bytes: float, objects: float, nodes: int, sharded: bool, link: S3Link) -> CopyTime:
    """A copy of the prefix to each node's disk (sharded: each node 1/N of the objects). Every node GETs from the
    same prefix at once, so they share its request rate; a replacement node copies alone, with fresh credits."""
    share = 1.0 / nodes if sharded else 1.0
    net_s, burst_used = transfer_seconds(size_bytes * share, link, BURST_MINUTES * 60.0)
    gets_start = objects * share * nodes / S3_GETS_PER_PREFIX_PER_S
    gets_one = objects * share / S3_GETS_PER_PREFIX_PER_S
    bound = "network"
    if gets_start > net_s:
        bound = "S3 requests"
        if size_bytes * share / gets_start <= link.baseline_bytes_s:
            burst_used = 0.0   # a copy paced by S3's requests stays under the baseline: it spends no credits
    return CopyTime(max(net_s, gets_start), max(net_s, gets_one), burst_used, bound)


def stream_step_seconds(step_s: float, nic_comm_s: float, ingress_bytes_per_step: float, link_bytes_s: float) -> float:
    """A step when the node also streams its samples: the NIC carries the inter-node gradient traffic and the
    samples in the same direction (EC2's limits apply to each direction separately; a ring receives what it
    sends), so the step is at least their sum on the link."""
    return max(step_s, nic_comm_s + ingress_bytes_per_step / link_bytes_s)


def inter_region_usd_per_gb(data_region: str, option_region: str) -> float | None:
    """$ per GB read from a bucket in `data_region` by instances in `option_region` (0 in the same Region; None:
    the rate is not in the table)."""
    if data_region == option_region:
        return 0.0
    return INTER_REGION_USD_PER_GB.get(data_region)


def stream_cap_gbps(link_gbps: float, gradient_share: float, ingress_gbps: float) -> int:
    """mount-s3's throughput target on one node, whole Gbps: the link's baseline less the gradients' share of it (the
    fraction of the time the link carries them), so that a read burst cannot starve the all-reduce; never below the
    ingress the plan counts on for the samples (rounded up), and at least Mountpoint's minimum of 1 Gbps."""
    left = link_gbps * max(0.0, 1.0 - gradient_share)
    return max(MOUNT_S3_MIN_GBPS, int(left), math.ceil(ingress_gbps - 1e-9))

"""Pure arithmetic of the network a data-parallel job talks over: links, transports, collectives.

A layout's `Fabric` says how its ranks are wired: ranks per node, the link between ranks of one node (NVLink,
NVSwitch, PCIe or NeuronLink) and the link between nodes (EFA or TCP sockets, at burst or baseline bandwidth).
The collectives (ring all-reduce, FSDP's all-gathers and reduce-scatters) take a Fabric, so the same code
models an AWS layout (built from the catalog) and a published measurement's cluster (built from its row in
trainctl/catalog/calibration.json). The reasoning is in docs/cost-model.md, "Network".
"""
from __future__ import annotations

from dataclasses import dataclass

from trainctl.catalog import InstanceType
from trainctl.catalog.platforms import facts as platform_facts

# NCCL over plain TCP sockets rarely sustains more than ~70% of the line rate; EFA (libfabric) ~90%.
# ASSUMED (order of magnitude of nccl-tests bus bandwidth over sockets vs EFA); calibrated indirectly by the
# multi-node rows of the calibration table (scripts/eval_model.py reports the scaling efficiency error).
TCP_LINK_EFFICIENCY = 0.70
EFA_LINK_EFFICIENCY = 0.90
# Per-hop latency of one ring step. ASSUMED (tens of microseconds over TCP, ~15 us over EFA, a few inside a node).
TCP_HOP_LATENCY_S = 50e-6
EFA_HOP_LATENCY_S = 15e-6
INTRA_HOP_LATENCY_S = 5e-6
# "Up to" bandwidth: an instance bursts above its baseline with network I/O credits "typically 5 to 60 minutes",
# and a fresh instance starts with credits (EC2 User Guide, "Amazon EC2 instance network bandwidth"; see
# ../shared/reference/AWS-RULES.md). trainctl takes the documented lower bound: it never promises more burst.
BURST_MINUTES = 5.0


@dataclass(frozen=True)
class Link:
    gbytes_per_s: float   # effective payload bandwidth
    hop_latency_s: float
    describe: str


@dataclass(frozen=True)
class Fabric:
    """How a layout's ranks are wired: `inter` is None for a single node."""

    ranks_per_node: int
    intra: Link
    inter: Link | None


def efa_in_use(instance: InstanceType, platform: str) -> bool:
    """EC2 launches attach EFA on every card of EFA types (backends/ec2/prepare.py); SageMaker only on its list
    (`efa_types` of backends/sagemaker/platform.toml, catalog/platforms.py)."""
    if not instance.efa:
        return False
    only = platform_facts(platform).efa_types
    return only is None or instance.name in only


def inter_node_link(instance: InstanceType, platform: str = "ec2", bandwidth: str = "baseline") -> Link:
    """The node's network as NCCL sees it: EFA, or TCP sockets at the burst or the baseline rate.

    Without EFA, NCCL's sockets run over the primary network card only; on multi-card types (p4d 4 cards,
    p5 32, trn1.32xlarge 8, trn1n 16) that is the type's bandwidth divided by its cards (ASSUMED: cards carry
    equal shares of the headline figure, as AWS describes p4d's 4 x 100 Gbps)."""
    if efa_in_use(instance, platform):
        gbps = instance.network_gbps_burst
        return Link(gbps * EFA_LINK_EFFICIENCY / 8.0, EFA_HOP_LATENCY_S, f"{gbps:g} Gbps EFA")
    cards = max(1, instance.efa_interfaces)
    burst = bandwidth == "burst" and instance.network_up_to
    gbps = (instance.network_gbps_burst if burst else instance.network_gbps_baseline) / cards
    words = f"{gbps:g} Gbps TCP"
    if instance.network_up_to:
        words += (f" burst (credits last ~{BURST_MINUTES:g} min)" if burst else
                  f" baseline ({instance.network_gbps_burst:g} Gbps burst lasts minutes)")
    if cards > 1:
        words += f" (one of {cards} network cards)"
    if instance.efa and (own := platform_facts(platform)).efa_types is not None:
        words += f"; {own.title} enables EFA only on " + ", ".join(sorted(own.efa_types))
    return Link(gbps * TCP_LINK_EFFICIENCY / 8.0, TCP_HOP_LATENCY_S, words)


def intra_node_link(instance: InstanceType) -> Link:
    gbs = instance.accelerator.intra_node_gbytes_s
    return Link(gbs, INTRA_HOP_LATENCY_S, f"{gbs:g} GB/s between {instance.accelerator.key}s")


def fabric(instance: InstanceType, ranks_per_node: int, nodes: int, platform: str = "ec2",
           bandwidth: str = "baseline") -> Fabric:
    inter = inter_node_link(instance, platform, bandwidth) if nodes > 1 else None
    return Fabric(ranks_per_node, intra_node_link(instance), inter)


def cluster_fabric(ranks_per_node: int, intra_gbytes_s: float, inter_gbps: float | None, transport: str) -> Fabric:
    """A published measurement's cluster (a calibration row): links given as numbers."""
    intra = Link(intra_gbytes_s, INTRA_HOP_LATENCY_S, f"{intra_gbytes_s:g} GB/s inside the node")
    if not inter_gbps:
        return Fabric(ranks_per_node, intra, None)
    eff, lat = (EFA_LINK_EFFICIENCY, EFA_HOP_LATENCY_S) if transport == "efa" else \
        (TCP_LINK_EFFICIENCY, TCP_HOP_LATENCY_S)
    return Fabric(ranks_per_node, intra, Link(inter_gbps * eff / 8.0, lat, f"{inter_gbps:g} Gbps {transport}"))


# ----------------------------------------------------------------------------- collectives
def ring_allreduce_seconds(size_bytes: float, ranks: int, link: Link) -> float:
    """Ring all-reduce: each rank sends and receives 2(n-1)/n of the buffer in 2(n-1) hops."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks * size_bytes / (link.gbytes_per_s * 1e9) + 2 * (ranks - 1) * link.hop_latency_s


def gradient_sync_seconds(size_bytes: float, nodes: int, fab: Fabric) -> float:
    """Hierarchical all-reduce (as NCCL does across nodes): reduce-scatter inside the node, all-reduce of the
    node's shards across nodes (the node's NIC carries the whole buffer's 2(n-1)/n), all-gather inside."""
    intra = ring_allreduce_seconds(size_bytes, fab.ranks_per_node, fab.intra)
    inter = ring_allreduce_seconds(size_bytes, nodes, fab.inter) if nodes > 1 and fab.inter else 0.0
    return intra + inter


def fsdp_sync_seconds(params: float, nodes: int, fab: Fabric) -> float:
    """Full sharding all-gathers 16-bit parameters twice (forward, backward) and reduce-scatters 16-bit
    gradients: each rank moves 3 x 2 bytes x params x (N-1)/N. In a ring over N ranks every link, the node's
    NIC included, carries one rank's share of that volume, not the volume times the ranks on the node (NCCL
    builds its rings so that each crosses a node boundary once per direction): the slowest link sets the pace."""
    n = nodes * fab.ranks_per_node
    if n <= 1:
        return 0.0
    volume = 3 * 2 * params * (n - 1) / n
    link = fab.intra
    if nodes > 1 and fab.inter and fab.inter.gbytes_per_s <= fab.intra.gbytes_per_s:
        link = fab.inter
    return volume / (link.gbytes_per_s * 1e9) + 3 * (n - 1) * link.hop_latency_s


def hsdp_sync_seconds(params: float, nodes: int, fab: Fabric) -> float:
    """Hybrid sharding: the full-sharding traffic of one node's ranks stays on the node's own link, and each
    rank all-reduces its 1/r share of the fp32 gradients (the entrypoint's reduce precision) with the ranks
    holding the same share on the other nodes; the r rings of a node together move the whole 4 x params
    through its NIC, 2(n-1)/n of it, as a ring all-reduce of the full gradient does."""
    r = fab.ranks_per_node
    intra = 0.0
    if r > 1:
        intra = 3 * 2 * params * (r - 1) / r / (fab.intra.gbytes_per_s * 1e9) + 3 * (r - 1) * fab.intra.hop_latency_s
    inter = ring_allreduce_seconds(4.0 * params, nodes, fab.inter) if nodes > 1 and fab.inter else 0.0
    return intra + inter

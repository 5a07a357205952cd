"""Pure: the terms a job's input data adds to one option: the copy at start (billed, and repeated by each Spot
replacement), the ingress of streamed samples on the link the gradients use (an `input-bound` cap), and the dollars
of S3 requests and of reading across Regions. The arithmetic is perf/data_transfer.py; the sizes come from the spec
or from ListObjectsV2 (usecases/plan.py through aws/data_size.py). docs/cost-model.md, "Input data".
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from trainctl import perf
from trainctl.catalog import InstanceType, load_calibration
from trainctl.catalog.platforms import facts as platform_facts
from trainctl.perf import data_transfer as dt
from trainctl.perf.network import BURST_MINUTES, Fabric, Link, inter_node_link
from trainctl.planner.pricing import Feed as _Feed, job_times
from trainctl.planner.spot import risk
from trainctl.plans import DataTerms
from trainctl.spec.data import S3Channel

# A link so fast that only the inter-node part of a step's communication is left: what crosses the node's NIC.
_NO_INTRA = Link(1e12, 0.0, "inside the node")


@dataclass(frozen=True)
class ChannelFacts:
    """What the plan knows of one channel beyond the spec: measured when live, else given."""

    size_bytes: float | None = None
    objects: int | None = None
    region: str | None = None        # the bucket's Region (None: not known, offline)
    source: str = "given"            # given | measured


@dataclass(frozen=True)
class LayoutData:
    """One layout's data terms in one Region, before the run model says how many replacements to expect."""

    node_copy_bytes: float = 0.0      # what one node copies (sharded: its part)
    node_copy_gets: float = 0.0
    stream_bytes: float = 0.0         # streamed over the whole run, all nodes
    stream_gets: float = 0.0
    copy_start_hours: float = 0.0
    ingress_gbps: float = 0.0         # per node while training
    stream_cap_gbps: int | None = None  # mount-s3's throughput target per node (EC2), when something is streamed
    input_bound: bool = False
    usd_per_gb: float | None = 0.0    # None: the inter-Region rate is unknown
    unpriced: tuple[str, ...] = ()
    words: tuple[str, ...] = field(default_factory=tuple)

    def option_terms(self, platform: str, count: int, events: float, same_event_p: float,
                     ) -> tuple[DataTerms, float]:
        """(the option's `data` field, its data dollars) once the run model says how many replacements to expect:
        SageMaker restarts the job (every node copies again), EC2 replaces the nodes an event takes."""
        nodes_per_event = count if platform_facts(platform).restarts_whole_job else 1 + (count - 1) * same_event_p
        copies = (1.0 + events) if self.node_copy_bytes else 0.0
        recopy_nodes = events * nodes_per_event
        gb = (self.node_copy_bytes * (count + recopy_nodes) + self.stream_bytes) / dt.GB if self.node_copy_bytes \
            else self.stream_bytes / dt.GB
        gets = self.node_copy_gets * (count + recopy_nodes) + self.stream_gets
        egress = None if self.usd_per_gb is None else gb * self.usd_per_gb
        requests = gets * dt.S3_GET_USD_PER_REQUEST
        terms = DataTerms(copy_hours=self.copy_start_hours, copies=copies, ingress_gbps=self.ingress_gbps,
                          egress_usd=egress, requests_usd=requests, input_bound=self.input_bound,
                          priced=not self.unpriced, stream_cap_gbps=self.stream_cap_gbps)
        return terms, (egress or 0.0) + requests

    def dollar_words(self, terms: DataTerms | None) -> tuple[str, ...]:
        if terms is None or not (self.node_copy_bytes or self.stream_bytes):
            return ()
        copies = (f"{terms.copies:.2f} expected copies (the start's and one per replacement)" if terms.copies else
                  "streamed once per sample read")
        egress = ("not priced" if terms.egress_usd is None else f"${terms.egress_usd:,.2f}" if terms.egress_usd else
                  "none (same Region)")
        return (f"data dollars: ${terms.requests_usd:,.2f} of S3 GETs (${dt.S3_GET_USD_PER_REQUEST * 1e3:g} per 1,000) "
                f"over {copies}; cross-Region transfer {egress}",)


def channel_facts(spec, measured: dict[str, ChannelFacts]) -> dict[str, ChannelFacts]:
    """Each S3 channel's facts: the measured ones, else the size given in the spec (objects and Region unknown)."""
    out = {}
    for name, ch in (spec.data or {}).items():
        if name in measured:
            got = measured[name]
            size = ch.size_gb * dt.GB if ch.size_gb else got.size_bytes
            out[name] = replace(got, size_bytes=size, source="given" if ch.size_gb else got.source)
        elif ch.size_gb:
            out[name] = ChannelFacts(size_bytes=ch.size_gb * dt.GB)
        else:
            out[name] = ChannelFacts()
    return out


def layout_data(run, inst: InstanceType, count: int, platform: str, region: str, fit, tp, feed: _Feed,
                n_acc: int) -> tuple[_Feed, risk.JobTimes, LayoutData | None]:
    """(the feed after the data's cap, the run's times with the copy, the data terms); `run` is the planner's
    _Planning. Without `data:` in the spec: the times as before and no terms."""
    spec = run.spec
    if not spec.data:
        return feed, job_times(spec, run.shape, inst, count, fit.strategy, n_acc, feed.samples_per_s), None
    facts = channel_facts(spec, run.request.data_facts)
    data, feed = _terms(run, inst, count, platform, region, fit, tp, feed, facts)
    times = job_times(spec, run.shape, inst, count, fit.strategy, n_acc, feed.samples_per_s)
    if data.node_copy_bytes:
        link = dt.s3_link(inst, _cross(facts, region))
        recopy = dt.copy_time(data.node_copy_bytes, data.node_copy_gets, 1, False, link).replacement_s
        # SageMaker restarts the whole job on fresh instances: every node copies again, as at the start.
        restart_h = data.copy_start_hours if platform_facts(platform).restarts_whole_job else recopy / 3600.0
        times = replace(times, copy_start_hours=data.copy_start_hours, copy_restart_hours=restart_h)
    return feed, times, data


def _cross(facts: dict[str, ChannelFacts], region: str) -> bool:
    return any(f.region is not None and f.region != region for f in facts.values())


def _terms(run, inst, count, platform, region, fit, tp, feed: _Feed, facts) -> tuple[LayoutData, _Feed]:
    spec = run.spec
    samples = spec.workload.dataset_size
    copy_bytes = copy_gets = stream_bps = stream_gps = 0.0
    words, unpriced, fsx = [], [], []
    rates = set()
    for name, ch in spec.data.items():
        if not isinstance(ch, S3Channel):
            fsx.append(name)
            continue
        f = facts[name]
        if f.size_bytes is None:
            unpriced.append(f"{name}: size unknown (give data.{name}.size_gb, or plan with credentials that may "
                            f"ListObjectsV2 on s3://{ch.bucket}/{ch.prefix})")
            continue
        objects = f.objects if f.objects is not None else (f.size_bytes / ch.bytes_per_sample if ch.bytes_per_sample
                                                           else f.size_bytes / (samples or 1) if samples else 1.0)
        rate = dt.inter_region_usd_per_gb(f.region, region) if f.region else 0.0
        rates.add(rate)
        if ch.mode == "stream":
            bps = ch.bytes_per_sample or (f.size_bytes / samples if samples else None)
            if bps is None:
                unpriced.append(f"{name}: bytes per sample unknown (give data.{name}.bytes_per_sample or "
                                "workload.dataset_size)")
                continue
            stream_bps += bps
            stream_gps += objects / samples if samples else 1.0
        else:
            share = 1.0 / count if ch.mode == "sharded" else 1.0
            copy_bytes += f.size_bytes * share
            copy_gets += objects * share
    if fsx:
        words.append(f"data: {', '.join(fsx)} on FSx for Lustre, mounted: no copy, no S3 traffic")
    cross = _cross(facts, region)
    link = dt.s3_link(inst, cross)
    usd = None if None in rates else max(rates, default=0.0)
    data = LayoutData(usd_per_gb=usd, unpriced=tuple(unpriced))
    if copy_bytes:
        data, feed = _copy_terms(data, tp, feed, copy_bytes, copy_gets, count, link, platform)
    if stream_bps:
        data, feed = _stream_terms(run, data, inst, count, platform, fit, tp, feed, stream_bps, stream_gps, link)
    if cross:
        where = {f.region for f in facts.values() if f.region}
        data = replace(data, words=data.words + (
            f"data read from {', '.join(sorted(where))} into {region}: " +
            (f"${usd:.2f}/GB inter-Region transfer (S3 pricing)" if usd is not None else
             "inter-Region transfer rate not in trainctl's table: not priced"),))
    return replace(data, words=tuple(words) + data.words + tuple(f"data not priced: {u}" for u in unpriced)), feed


def _copy_terms(data: LayoutData, tp, feed: _Feed, node_bytes: float, node_gets: float, count: int,
                link: dt.S3Link, platform: str) -> tuple[LayoutData, _Feed]:
    copy, own = dt.copy_time(node_bytes, node_gets, count, False, link), platform_facts(platform)
    line = (f"data: each node copies {node_bytes / dt.GB:,.1f} GB ({node_gets:,.0f} objects) at start in "
            f"{copy.start_s / 60:,.1f} min, billed; bound by {copy.bound} ({link.words}; "
            f"{dt.S3_GETS_PER_PREFIX_PER_S:,.0f} GET/s per S3 prefix shared by {count} node{'s' if count > 1 else ''})"
            + (f"; after a Spot interruption {own.title} restarts the job and every node copies again"
               if own.restarts_whole_job else
               f"; a replacement node copies its part again ({copy.replacement_s / 60:,.1f} min)"))
    words = (line,)
    if link.up_to and copy.burst_s_used >= BURST_MINUTES * 60.0 and count > 1 and tp.network != "sustained" \
            and tp.sustained.samples_per_s < feed.samples_per_s:
        # the copy spent the burst credits the throughput assumed for the first minutes of training
        feed = replace(feed, samples_per_s=tp.sustained.samples_per_s)
        words += (f"the copy spends the ~{BURST_MINUTES:g} min of burst credits: training runs at the "
                  f"baseline from its first step ({tp.sustained.samples_per_s:,.0f} samples/s)",)
    return replace(data, node_copy_bytes=node_bytes, node_copy_gets=node_gets,
                   copy_start_hours=copy.start_s / 3600.0, words=data.words + words), feed


def _nic_comm_seconds(run, inst, count: int, fit, tp, platform: str) -> float:
    """Seconds per step the inter-node gradient traffic keeps the node's NIC busy, at the baseline."""
    if count <= 1:
        return 0.0
    r = perf.ranks(inst, load_calibration()).per_node
    fab = Fabric(r, _NO_INTRA, inter_node_link(inst, platform, "baseline"))
    return perf.layout_throughput(run.shape, fab, count, fit.micro_batch, tp.sustained.per_accelerator_compute,
                                  fit.strategy, fit.grad_accum).comm_seconds


def _stream_terms(run, data: LayoutData, inst, count: int, platform: str, fit, tp, feed: _Feed, bps: float,
                  gets_per_sample: float, link: dt.S3Link) -> tuple[LayoutData, _Feed]:
    """Streamed samples share the node's link with the gradients, at the baseline (the burst lasts minutes)."""
    step = tp.sustained.step_seconds
    per_node_step = fit.micro_batch * fit.grad_accum * perf.ranks(inst, load_calibration()).per_node
    nic = _nic_comm_seconds(run, inst, count, fit, tp, platform)
    link_step = dt.stream_step_seconds(step, nic, per_node_step * bps, link.baseline_bytes_s)
    # the link caps the run only where it cannot carry both: then at the baseline's rate, slowed by the samples
    link_cap = tp.sustained.samples_per_s * step / link_step if link_step > step * (1 + 1e-9) else float("inf")
    gets_cap = dt.S3_GETS_PER_PREFIX_PER_S / gets_per_sample
    rate = min(feed.samples_per_s, link_cap, gets_cap)
    bound = rate < feed.samples_per_s * (1 - 1e-9)
    ingress = rate / count * bps * 8 / dt.GB
    total = run.spec.workload.total_samples
    # the gradients' share of the link's time at this rate: what mount-s3 must leave them on EC2
    share = min(1.0, nic * rate / (per_node_step * count)) if rate > 0 else 0.0
    cap = dt.stream_cap_gbps(link.baseline_bytes_s * 8 / dt.GB, share, ingress)
    line = (f"data: streams {bps / 1e3:,.0f} KB/sample, {ingress:,.2f} Gbps per node on the link the gradients use "
            f"({link.words}; baseline counted, the burst lasts minutes)"
            + (f"; mount-s3 capped at {cap} Gbps per node (the gradients use {share:.0%} of the link)"
               if platform_facts(platform).streams_via_mount_s3 else ""))
    if bound:
        what = "S3's GET rate per prefix" if gets_cap <= link_cap else "the node's link"
        line = (f"INPUT-BOUND by {what}: " + line + f"; capped from {feed.samples_per_s:,.0f} to {rate:,.0f} "
                "samples/s (copy the data at start, or shard it into larger objects)")
        feed = _Feed(rate, True, feed.ratio, feed.words)
    return replace(data, stream_bytes=bps * total, stream_gets=gets_per_sample * total, ingress_gbps=ingress,
                   input_bound=bound, stream_cap_gbps=cap, words=data.words + (line,)), feed

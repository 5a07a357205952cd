"""The input data's terms in the plan: copy time, its repeats after Spot replacements, streamed ingress on the
gradients' link, and the dollars of requests and of reading across Regions (perf/data_transfer.py,
planner/data_terms.py)."""
from __future__ import annotations

import pytest

from tests.support.helpers import CONFIGS
from trainctl.catalog import load_catalog
from trainctl.perf import data_transfer as dt
from trainctl.planner import PlanRequest, plan
from trainctl.planner.data_terms import ChannelFacts
from trainctl.planner.quotes import Quotes
from trainctl.spec import JobSpec, Layout, load_spec

CAT = load_catalog()
REFERENCE = ("g5.12xlarge:1:on-demand", "g5.2xlarge:4:spot", "g5.4xlarge:4:spot")


def spec_with(train: dict | None, regions=("us-east-1",)) -> JobSpec:
    data = load_spec(CONFIGS / "vit-imagenet-data.yaml").model_dump(exclude_none=True)
    data["data"] = None if train is None else {"train": train}
    data["candidates"]["regions"] = list(regions)
    return JobSpec.model_validate(data)


def planned(spec: JobSpec, facts=None, layouts=REFERENCE, platform="ec2"):
    req = PlanRequest(layouts=tuple(Layout.parse(x) for x in layouts), platforms=(platform,),
                      data_facts=facts or {})
    return plan(spec, CAT, Quotes.offline(spec.candidates.regions), req)


def find(p, itype, count, market, region="us-east-1"):
    return next(o for o in p.options if (o.instance_type, o.count, o.market, o.region) == (itype, count, market, region))


COPY = {"uri": "s3://my-data-bucket/train/", "mode": "copy", "size_gb": 140, "bytes_per_sample": 110000}


def test_a_copy_of_large_objects_is_bounded_by_the_link():
    """100 GB in 100 objects to one g5.12xlarge (40 Gbps, no burst): the link at ~70% sets the time."""
    link = dt.s3_link(CAT.instance("g5.12xlarge"), cross_region=False)
    copy = dt.copy_time(100e9, 100, 1, False, link)
    assert copy.bound == "network"
    assert copy.start_s == pytest.approx(100e9 / (40e9 * dt.S3_LINK_EFFICIENCY / 8))


def test_an_up_to_link_copies_at_burst_then_at_baseline():
    link = dt.s3_link(CAT.instance("g5.2xlarge"), cross_region=False)   # up to 10 Gbps, 5 baseline
    seconds, burst_used = dt.transfer_seconds(500e9, link, 300.0)
    burst, base = 10e9 * dt.S3_LINK_EFFICIENCY / 8, 5e9 * dt.S3_LINK_EFFICIENCY / 8
    assert burst_used == 300.0
    assert seconds == pytest.approx(300.0 + (500e9 - burst * 300.0) / base)


def test_nodes_copying_one_prefix_share_its_request_rate_and_sharding_divides_it():
    link = dt.s3_link(CAT.instance("g5.4xlarge"), cross_region=False)
    whole = dt.copy_time(140e9, 1_280_000, 4, False, link)
    sharded = dt.copy_time(140e9, 1_280_000, 4, True, link)
    assert whole.bound == "S3 requests"
    assert whole.start_s == pytest.approx(4 * 1_280_000 / dt.S3_GETS_PER_PREFIX_PER_S)
    assert whole.replacement_s == pytest.approx(1_280_000 / dt.S3_GETS_PER_PREFIX_PER_S)   # a replacement alone
    assert sharded.start_s == pytest.approx(whole.start_s / 4)


def test_another_region_caps_an_instance_at_5_gbps_under_32_vcpus_and_half_its_bandwidth_above():
    rate = dt.S3_LINK_EFFICIENCY / 8
    assert dt.s3_link(CAT.instance("g5.4xlarge"), cross_region=True).baseline_bytes_s == pytest.approx(5e9 * rate)
    assert dt.s3_link(CAT.instance("g5.12xlarge"), cross_region=True).baseline_bytes_s == pytest.approx(20e9 * rate)
    assert dt.s3_link(CAT.instance("g5.12xlarge"), cross_region=False).baseline_bytes_s == pytest.approx(40e9 * rate)


def test_the_copy_is_billed_and_repeated_after_each_spot_replacement():
    without = planned(spec_with(None))
    withdata = planned(spec_with(COPY))
    od, spot = find(withdata, "g5.12xlarge", 1, "on-demand"), find(withdata, "g5.4xlarge", 4, "spot")
    assert od.data.copies == 1.0
    assert od.data.copy_hours > 0
    assert spot.data.copies == pytest.approx(1.0 + spot.interruptions_expected)
    for o in (od, spot):
        bare = find(without, o.instance_type, o.count, o.market)
        assert o.hours > bare.hours + o.data.copy_hours * 0.99   # the start's copy, billed, and the re-copies
        assert any(w.startswith("data: each node copies 140.0 GB") for w in o.why)
    # more replacements, more copies: the spot layout pays more than its first copy
    bare_spot = find(without, "g5.4xlarge", 4, "spot")
    assert spot.hours - bare_spot.hours > spot.data.copy_hours


def test_sagemaker_copies_again_on_every_node_after_an_interruption():
    ec2 = find(planned(spec_with(COPY)), "g5.4xlarge", 4, "spot")
    sm = find(planned(spec_with(COPY), platform="sagemaker"), "g5.4xlarge", 4, "spot")
    assert any("SageMaker restarts the job and every node copies again" in w for w in sm.why)
    assert sm.data.requests_usd > ec2.data.requests_usd * (1 + sm.interruptions_expected) / \
        (1 + ec2.interruptions_expected) * 0.99


def test_streamed_samples_that_overflow_the_baseline_make_the_layout_input_bound():
    heavy = dict(COPY, mode="stream", bytes_per_sample=2_000_000)
    light = dict(COPY, mode="stream", bytes_per_sample=10_000)
    bare = find(planned(spec_with(None)), "g5.2xlarge", 4, "spot")
    bound = find(planned(spec_with(heavy)), "g5.2xlarge", 4, "spot")
    free = find(planned(spec_with(light)), "g5.2xlarge", 4, "spot")
    assert bound.data.input_bound and bound.input_bound
    assert bound.throughput_samples_per_s < bare.throughput_samples_per_s
    assert any(w.startswith("INPUT-BOUND by the node's link") for w in bound.why)
    assert not free.data.input_bound
    assert free.throughput_samples_per_s == pytest.approx(bare.throughput_samples_per_s)
    assert free.data.ingress_gbps > 0 and free.data.copies == 0


def test_cross_region_dollars_only_where_the_data_is_elsewhere():
    spec = spec_with(COPY, regions=("us-east-1", "us-west-2"))
    facts = {"train": ChannelFacts(region="us-west-2", source="given")}
    p = planned(spec, facts)
    east, west = find(p, "g5.12xlarge", 1, "on-demand"), find(p, "g5.12xlarge", 1, "on-demand", "us-west-2")
    assert west.data.egress_usd == 0
    assert east.data.egress_usd == pytest.approx(140 * 0.02)   # one copy of 140 GB at $0.02/GB
    assert east.expected_cost_usd - east.hourly_usd * east.hours == pytest.approx(
        east.data.egress_usd + east.data.requests_usd, rel=1e-6)
    assert any("inter-Region transfer" in w for w in east.why)
    assert not any("inter-Region transfer" in w for w in west.why)


def test_a_channel_of_unknown_size_is_said_not_priced():
    p = planned(spec_with({"uri": "s3://my-data-bucket/train/"}))
    o = find(p, "g5.12xlarge", 1, "on-demand")
    assert o.data.priced is False and o.data.copies == 0
    assert any("data not priced: train: size unknown (give data.train.size_gb" in w for w in o.why)


def test_measured_facts_count_the_objects_listed():
    facts = {"train": ChannelFacts(size_bytes=50e9, objects=500, region="us-east-1", source="measured")}
    o = find(planned(spec_with({"uri": "s3://my-data-bucket/train/"}), facts), "g5.12xlarge", 1, "on-demand")
    assert o.data.priced and o.data.requests_usd == pytest.approx(500 * dt.S3_GET_USD_PER_REQUEST)
    assert any("50.0 GB (500 objects)" in w for w in o.why)


def test_fsx_data_is_mounted_not_copied():
    o = find(planned(spec_with({"fsx": "fs-0123456789abcdef0", "path": "/fsx/train"})), "g5.4xlarge", 4, "spot")
    assert o.data.copies == 0 and o.data.copy_hours == 0
    assert any("FSx for Lustre, mounted: no copy" in w for w in o.why)


def test_the_bundled_vit_reading_its_channel_is_planned_as_jpeg_decoding():
    data = load_spec(CONFIGS / "vit-base-g5.yaml").model_dump(exclude_none=True)
    assert JobSpec.model_validate(data).input_source == "device"
    data["data"] = {"train": COPY}
    o = find(planned(JobSpec.model_validate(data)), "g5.2xlarge", 4, "spot")
    assert any(w.startswith("input: jpeg data needs") for w in o.why)


def test_a_network_bound_copy_spends_the_burst_credits_the_training_would_have_used():
    """500 GB in 100 objects: the link, not S3's request rate, paces the copy, and it runs past the 5 minutes of
    burst; the 4 x g5.2xlarge layout then trains at its baseline from the first step."""
    facts = {"train": ChannelFacts(size_bytes=500e9, objects=100, region="us-east-1", source="measured")}
    bare = find(planned(spec_with(None)), "g5.2xlarge", 4, "spot")
    o = find(planned(spec_with({"uri": "s3://my-data-bucket/train/"}), facts), "g5.2xlarge", 4, "spot")
    assert any("bound by network" in w for w in o.why)
    assert any(w.startswith("the copy spends the ~5 min of burst credits") for w in o.why)
    assert o.throughput_samples_per_s < bare.throughput_samples_per_s


def test_streaming_more_objects_than_s3_serves_a_prefix_is_input_bound_by_the_get_rate():
    """Ten objects a sample (e.g. one file per frame): 1 x g5.12xlarge would need ~15,000 GET/s of one prefix."""
    facts = {"train": ChannelFacts(size_bytes=140e9, objects=12_811_670, region="us-east-1", source="measured")}
    o = find(planned(spec_with(dict(COPY, mode="stream")), facts), "g5.12xlarge", 1, "on-demand")
    assert o.input_bound and o.data.input_bound
    assert o.throughput_samples_per_s == pytest.approx(dt.S3_GETS_PER_PREFIX_PER_S / 10, rel=1e-3)
    assert any(w.startswith("INPUT-BOUND by S3's GET rate per prefix") for w in o.why)


def test_a_flexible_layout_carries_the_data_terms_of_the_type_it_is_priced_on():
    p = planned(spec_with(COPY), layouts=("g5.4xlarge|g5.8xlarge:4:spot",))
    o = next(o for o in p.options if o.region == "us-east-1")
    assert o.flexible and o.data.copies == pytest.approx(1.0 + o.interruptions_expected)
    assert any(w.startswith("data: each node copies 140.0 GB") for w in o.why)
    # its data dollars are in its simulated runs too (the flexible option keeps them through risk.with_spread)
    bare = next(o for o in planned(spec_with(None), layouts=("g5.4xlarge|g5.8xlarge:4:spot",)).options
                if o.region == "us-east-1")
    assert o.cost_p90_usd - bare.cost_p90_usd > o.data.requests_usd


def test_a_streamed_channel_caps_mount_s3_at_the_link_baseline_less_the_gradients_share():
    light = spec_with(dict(COPY, mode="stream", bytes_per_sample=110_000))
    alone = find(planned(light), "g5.12xlarge", 1, "on-demand")
    # one node: no gradients on the link, the whole baseline (40 Gbps at the TCP share of the line rate)
    assert alone.data.stream_cap_gbps == int(40 * dt.S3_LINK_EFFICIENCY)
    assert any("mount-s3 capped at 28 Gbps per node (the gradients use 0% of the link)" in w for w in alone.why)
    # four "up to 10 Gbps" nodes: the 5 Gbps baseline counts, and the gradients use most of it: the floor of 1
    shared = find(planned(light), "g5.2xlarge", 4, "spot")
    assert shared.data.stream_cap_gbps == dt.MOUNT_S3_MIN_GBPS
    # never below what the plan counts on for the samples themselves
    heavy = find(planned(spec_with(dict(COPY, mode="stream", bytes_per_sample=2_000_000))), "g5.4xlarge", 4, "spot")
    assert heavy.data.stream_cap_gbps >= heavy.data.ingress_gbps > 2
    # copied data has nothing to cap, and SageMaker's FastFile takes no cap
    assert find(planned(spec_with(COPY)), "g5.12xlarge", 1, "on-demand").data.stream_cap_gbps is None
    sagemaker = find(planned(light, platform="sagemaker"), "g5.12xlarge", 1, "on-demand")
    assert not any("mount-s3" in w for w in sagemaker.why)


def test_the_mount_s3_cap_is_whole_gbps_and_at_least_one():
    assert dt.stream_cap_gbps(28.0, 0.0, 1.3) == 28
    assert dt.stream_cap_gbps(3.5, 0.86, 0.08) == 1        # 0.49 Gbps left: mount-s3's minimum
    assert dt.stream_cap_gbps(3.5, 0.5, 2.2) == 3          # the samples' own 2.2 Gbps, rounded up
    assert dt.stream_cap_gbps(3.5, 1.5, 0.0) == 1

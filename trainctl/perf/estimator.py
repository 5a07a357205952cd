"""The throughput of one layout as a plan states it: where the rate comes from, the network it assumed,
and how far off it may be.

Pure. Source, in order of preference: a measurement of this model and batch on this instance type
(exact on the layout it was measured on; on another node count its compute rate is recovered by inverting
the network model for the measured layout, then the network model of the new layout is applied), a rate
given in the spec, or the calibrated model (perf/compute_rate.py). "Up to" links run at burst for the first
BURST_MINUTES of a fresh instance and at baseline after that; the estimate blends the two by time.
"""
from __future__ import annotations

from dataclasses import dataclass

from trainctl import perf
from trainctl.perf import compute_rate as perf_fit
from trainctl.perf import fp32_math, rate_fit
from trainctl.catalog import Calibration, Catalog, InstanceType, load_calibration_residuals
from trainctl.perf.network import BURST_MINUTES, fabric


@dataclass(frozen=True)
class MeasuredRate:
    samples_per_s: float   # the whole layout
    count: int             # nodes it was measured on
    job_id: str
    platform: str | None = None   # None: not recorded; taken as the platform being planned
    origin: str | None = None     # where it came from in words ("bench job X (date, ...)"); None: a completed job
    network: str | None = None    # the regime it ran in (usecases/bench/record.py); "burst": not the long run's
    accepted: bool = False        # `trainctl calibration --accept JOB`: used even above the hardware's peak


# A measured rate above this share of the layout's dense peak (every device at 100% of its peak TFLOPS for the
# model's FLOPs per sample) is not a measurement of training (a script printing tokens as samples, a hand-written
# figure): quarantined, the model decides instead. The margin covers FLOPs per sample overestimated (activation
# checkpointing counted, attention approximated).
PEAK_MARGIN = 1.5


@dataclass(frozen=True)
class Estimate:
    samples_per_s: float                 # over the whole run (burst and baseline blended)
    source: str                          # measured | given | model
    words: tuple[str, ...]               # the plan's why lines about throughput
    band: tuple[float, float] | None     # samples/s, about the 10th and 90th percentile of the model's error
    sustained: perf.Throughput           # at the bandwidth the link keeps for hours
    network: str                         # burst | baseline | burst, then baseline | none


@dataclass(frozen=True)
class Job:
    """What the estimate needs of the spec."""

    shape: perf.ModelShape
    model_name: str
    batch: int               # per rank and micro-batch
    samples: int
    strategy: str            # ddp | fsdp | hsdp (after the memory fit)
    given: float | None      # samples/s per rank from the spec
    accum: int = 1           # micro-batches per optimizer step (gradient accumulation)


def estimate(job: Job, inst: InstanceType, count: int, platform: str, measured: MeasuredRate | None,
             catalog: Catalog, calibration: Calibration) -> Estimate:
    rk = perf.ranks(inst, calibration)
    quarantine = _above_peak(job, inst, measured, catalog, calibration, rk)
    if quarantine:
        measured = None  # the model decides; the words say why
    rate, source, words, band_ratio = _compute_rate(job, inst, count, platform, measured, catalog, calibration, rk)
    if quarantine:
        words = f"{words}; {quarantine}"
    base_fab = fabric(inst, rk.per_node, count, platform, "baseline")
    burst_fab = fabric(inst, rk.per_node, count, platform, "burst")
    base = perf.layout_throughput(job.shape, base_fab, count, job.batch, rate, job.strategy, job.accum)
    burst = perf.layout_throughput(job.shape, burst_fab, count, job.batch, rate, job.strategy, job.accum)
    samples_per_s, network, net_words = _blend(job.samples, burst, base, inst.network_up_to)
    if count == 1:
        network = "none"
    if measured is not None and measured.count == count and not _burst_only(measured, inst, count):
        samples_per_s, network, net_words = measured.samples_per_s, "as measured", ""
    lines = [words]
    if base.bottleneck_link:
        lines.append(f"{job.strategy} sync {base.comm_seconds:.3f} s/step over {base.bottleneck_link} vs "
                     f"{base.compute_seconds:.3f} s compute ({base.scaling_efficiency:.0%} scaling)")
    if base.tensor_parallel_seconds:
        lines.append(f"tensor parallel {job.shape.tensor_parallel}: {base.tensor_parallel_seconds:.3f} s/step of "
                     f"activation collectives over {base_fab.intra.describe}, not overlapped (memory and "
                     f"parameters per {rk.unit} divided by {job.shape.tensor_parallel})")
    if net_words:
        lines.append(net_words)
    band = None
    if band_ratio is not None:
        band = (samples_per_s * band_ratio[0], samples_per_s * band_ratio[1])
        lines.append(f"throughput band {band[0]:,.0f}-{band[1]:,.0f} samples/s ({band_ratio[2]})")
    return Estimate(samples_per_s, source, tuple(lines), band, base, network)


def _burst_only(measured: MeasuredRate, inst: InstanceType, count: int) -> bool:
    """A short bench of several "up to" nodes saw burst bandwidth: its compute rate is kept (inverted at burst),
    and the network term of the run is the model's (burst, then baseline), not the bench's."""
    return measured.network == "burst" and inst.network_up_to and count > 1


def _blend(samples: int, burst: perf.Throughput, base: perf.Throughput, up_to: bool) -> tuple[float, str, str]:
    """Samples/s over the run: burst credits last BURST_MINUTES on a fresh instance, then the baseline."""
    if not up_to or burst.samples_per_s <= base.samples_per_s:
        return base.samples_per_s, "sustained", ""
    window = BURST_MINUTES * 60.0
    if samples / burst.samples_per_s <= window:
        return burst.samples_per_s, "burst", (f"network: a run this short ({samples / burst.samples_per_s / 60:.1f} "
                                              f"min) stays within the ~{BURST_MINUTES:g} min of burst credits")
    seconds = window + (samples - window * burst.samples_per_s) / base.samples_per_s
    share = 1 - window / seconds
    return samples / seconds, "burst, then baseline", (
        f"network: burst for the first ~{BURST_MINUTES:g} min (fresh credits), then baseline for {share:.0%} "
        f"of the run ({burst.samples_per_s:,.0f} then {base.samples_per_s:,.0f} samples/s)")


def _compute_rate(job: Job, inst: InstanceType, count: int, platform: str, measured: MeasuredRate | None,
                  catalog: Catalog, calibration: Calibration, rk: perf.Ranks):
    """(per-rank compute rate, source, words, band as (low ratio, high ratio, words) or None)."""
    unit = rk.unit
    if measured is not None:
        seen = "burst" if measured.network == "burst" else "baseline"
        fab = fabric(inst, rk.per_node, measured.count, measured.platform or platform, seen)
        device = perf_fit.device_for(catalog, calibration, inst.accelerator.key)
        peak_rate = _highest_peak(job.shape, device) * 1e12 / job.shape.training_flops_per_sample
        rate = perf.invert_compute_rate(job.shape, fab, measured.count, job.batch, measured.samples_per_s,
                                        job.strategy, job.accum, max_rate=peak_rate)
        where = "this layout" if measured.count == count else \
            f"{measured.count} node{'s' if measured.count > 1 else ''}, rescaled by the network model"
        capped = " (capped at the peak: the measured step is almost all communication)" if rate >= peak_rate else ""
        rate, sync_words = _sync_rescaled(rate, measured.count * rk.per_node, count * rk.per_node, catalog, calibration)
        who = measured.origin or f"job {measured.job_id}"
        return rate, "measured", (f"throughput measured by {who} on {where}: "
                                  f"{measured.samples_per_s:,.0f} samples/s; compute {rate:,.1f} samples/s per "
                                  f"{unit} once its modelled communication is taken out{capped}{sync_words}"), None
    if job.given is not None:
        return job.given, "given", f"throughput given in the spec: {job.given:g} samples/s per {unit}", None
    return _modelled_rate(job, inst, count, catalog, calibration, rk)


def _highest_peak(shape: perf.ModelShape, device: perf_fit.Device) -> float:
    """TFLOPS a measurement may reach: the precision's dense peak; for fp32 with TF32 allowed or not known the TF32
    one (a measured fp32 run on an A100 with TF32 on is not 'above the peak' of 19.5)."""
    return max(p for p, _ in fp32_math.paths(device.peak_tflops, shape.precision, perf_fit.allows_tf32(shape), 0.0))


def _above_peak(job: Job, inst: InstanceType, measured: MeasuredRate | None, catalog: Catalog,
                calibration: Calibration, rk: perf.Ranks) -> str | None:
    """Why a measurement is quarantined (above what the layout can do at peak), or None."""
    if measured is None or measured.accepted:
        return None
    device = perf_fit.device_for(catalog, calibration, inst.accelerator.key)
    peak = _highest_peak(job.shape, device) * 1e12 / job.shape.training_flops_per_sample
    bound = PEAK_MARGIN * peak * rk.per_node * measured.count
    if measured.samples_per_s <= bound:
        return None
    return (f"the throughput job {measured.job_id} measured ({measured.samples_per_s:,.0f} samples/s) is above what "
            f"{measured.count} x {inst.name} can do at peak ({bound:,.0f} samples/s): quarantined, not used "
            f"(`trainctl calibration --accept {measured.job_id}` uses it)")


def _sync_rescaled(rate: float, measured_ranks: int, ranks: int, catalog: Catalog, calibration: Calibration):
    """A rate measured on one rank pays the synchronous step's loss on several, and one measured on several gets
    it back on one (compute_rate.py: the fitted loss of published 1-GPU vs 8-GPU pairs)."""
    if (measured_ranks > 1) == (ranks > 1):
        return rate, ""
    loss = rate_fit.calibrated(catalog, calibration, load_calibration_residuals()).sync_loss
    if ranks > 1:
        return rate / (1.0 + loss), f", less the {loss:.0%} synchronous-step loss of {ranks} ranks"
    return rate * (1.0 + loss), f", plus the {loss:.0%} synchronous-step loss a single rank does not pay"


STACK_WORDS = {"tuned": "a vendor-tuned stack", "amp": "plain PyTorch with autocast (AMP)", "compile": "torch.compile",
               perf_fit.UNKNOWN_STACK: "a stack it could not tell"}


@dataclass(frozen=True)
class ModelledRate:
    rate: float                                  # samples/s of one rank
    words: str
    band: tuple[float, float, str] | None        # (low, high) published/predicted ratios, and their origin


def band_kind(shape: perf.ModelShape, fit: perf_fit.Fit) -> str:
    """Which out-of-source band a prediction takes (scripts/eval_model.py builds each from predictions made the same
    way): `size` for a transformer given by params and FLOPs alone, `auto` when the stack is not known, `code` when
    it was read from the user's code (a reading can be wrong: its band holds the published rows' errors when their
    scripts are read), `stack` when the spec or the bundled entrypoint says it."""
    if shape.family != "cnn" and not shape.hidden:
        return "size"
    if shape.stack not in fit.stacks:
        return "auto"
    return "code" if shape.stack_read else "stack"


def band_span(shape: perf.ModelShape, device: perf_fit.Device, fit: perf_fit.Fit) -> tuple[float, float]:
    """The factors the plan's band is widened to at least: every fitted stack where the stack is not known, fp32 with
    and without TF32 where that is not known (scripts/eval_model.py measures coverage on the same band)."""
    stack = perf_fit.stack_rate_span(shape, device, fit)
    tf32 = perf_fit.tf32_rate_span(shape, device, fit)
    return stack[0] * tf32[0], stack[1] * tf32[1]


def modelled_rate(shape: perf.ModelShape, device_key: str, ranks: int, micro_batch: int, unit: str,
                  catalog: Catalog, calibration: Calibration, fit: perf_fit.Fit, residuals: dict) -> ModelledRate:
    """The calibrated compute rate of one rank for a spec's model shape: the one predictor, called by the plan
    (below) and by scripts/eval_model.py for every published row, each with its fit and its bands."""
    device = perf_fit.device_for(catalog, calibration, device_key)
    family = shape.family or "language"      # a model given by params and FLOPs: taken as a transformer LM
    eff, basis = fit.efficiency(device.group, family, shape.stack)
    multi = ranks > 1
    rate = 1.0 / perf_fit.seconds_per_sample(shape, device, eff, fit, micro_batch, multi)
    # The band of out-of-source errors where published rows of this device and family were in the fit; anywhere
    # else (the A10G: only the A10's rows; L4: no rows of its die) the cross-device band, and the plan says so.
    seen = any(r.device == device_key and calibration.shapes[r.model].family == family for r in calibration.rows)
    kind = band_kind(shape, fit)
    res = residuals.get(f"band_{'seen' if seen else 'unseen'}_{kind}")
    band = None
    if res:
        low, high = residuals.get("band_percentiles", (1.0, 99.0))
        origin = f"percentiles {low:g}-{high:g} of the model's errors on published sources left out of its fit"
        span, tf32_unknown = band_span(shape, device, fit), perf_fit.tf32_rate_span(shape, device, fit)[0] < 1
        lo, hi = min(res["ratio_low"], span[0]), max(res["ratio_high"], span[1])
        if (lo, hi) != (res["ratio_low"], res["ratio_high"]):
            origin += (f", widened to hold every fitted stack{' and fp32 with or without TF32' if tf32_unknown else ''}"
                       f" (x{span[0]:.2f} to x{span[1]:.2f})")
        band = (lo, hi, origin if seen else f"{origin}; no published {device_key} {family}-model row: the "
                                           "cross-device spread")
    t = shape.tensor_parallel
    tp = f" ({perf_fit.width(shape):,.0f} over {t} tensor-parallel ranks)" if t > 1 else ""
    width_words = "" if shape.family == "cnn" else \
        (f" x width {perf_fit.width(shape) / t:,.0f}{'' if shape.hidden else ' (estimated from the parameter count)'}"
         f"{tp}/(+{fit.size_knee:g})")
    overhead = perf_fit.step_overhead_seconds(shape)
    traffic = fit.traffic_weight(shape.stack) * fit.traffic(shape, device)
    # the peak the efficiency multiplies: the precision's, or for fp32 what its paths give (fp32_math), so that the
    # words' product is the rate
    peak = shape.training_flops_per_sample / (perf_fit.compute_seconds(shape, device, eff, fit) * 1e12 * eff
                                              * perf_fit.knee(shape, fit.size_knee))
    words = (f"throughput modelled on {fit.rows} published measurements, assuming {STACK_WORDS[shape.stack]} "
             f"({shape.stack_basis}): {device_key} {peak:.4g} TFLOPS {shape.precision}{_tf32_words(shape, device, fit)} per "
             f"{unit} x {eff:.0%} ({basis}){width_words}"
             + (f", + {traffic * 1e3:.3g} ms per sample of memory traffic"
                + (f" (fused kernels: {fit.fused_traffic:.0%} of an eager stack's)"
                   if shape.stack in perf_fit.FUSED_STACKS else "")
                + f" at {device.memory_gbytes_s:,.0f} GB/s" if traffic > 0 else "")
             + (f", {fit.sync_loss:.0%} synchronous-step loss over {ranks} ranks" if multi else "")
             + f", {overhead * 1e3:.1f} ms fixed per step = {f'{rate:,.1f}' if rate >= 1 else f'{rate:.3g}'}"
             + f" samples/s per {unit}")
    return ModelledRate(rate, words, band)


def cnn_by_size_words(shape: perf.ModelShape, residuals: dict) -> str | None:
    """A CNN has no shape in a spec: it is given by its size and modelled on the fit's CNN rows (ResNets). The plan
    cannot tell a depthwise-separable network from its size, and on the published ones (calibration.json
    check_rows, scored by scripts/eval_model.py into calibration_fit.json) the model is several times too fast:
    said in one line for every CNN, with those rows' figures. None for a transformer."""
    if shape.family != "cnn":
        return None
    words = "a CNN given by its size is modelled on the CNN rows of the fit (ResNets)"
    checks = residuals.get("check_rows")
    if checks:
        words += (f"; on published rows of depthwise-separable networks ({', '.join(checks['models'])}) it predicted "
                  f"x{checks['predicted_over_published'][0]:.1f} to x{checks['predicted_over_published'][1]:.0f} "
                  "their measured rate")
    return words + ": an architecture unlike ResNet's may run several times slower than this plan says"


def _tf32_words(shape: perf.ModelShape, device: perf_fit.Device, fit: perf_fit.Fit) -> str:
    if shape.precision != "fp32":
        return ""
    gain = fp32_math.simt_gain(device.peak_tflops, fit.simt_exponent)
    simt = "fp32 on the CUDA cores" + (f", at x{gain:.2f} the die's tensor-core efficiency (fitted to published TF32 "
                                       f"on/off runs), at most their peak" if gain > 1 else "")
    if "tf32" not in device.peak_tflops:
        return f" ({simt})" if gain > 1 else ""
    if shape.tf32 is None and perf_fit.allows_tf32(shape):
        return " (TF32: cuDNN convolutions allow it by default)"
    return {True: " (TF32 allowed)", False: f" (TF32 off: {simt})"}.get(
        shape.tf32, f" (TF32 not known: between TF32 and {simt})")


def _modelled_rate(job: Job, inst: InstanceType, count: int, catalog: Catalog, calibration: Calibration,
                   rk: perf.Ranks):
    residuals = load_calibration_residuals()
    fit = rate_fit.calibrated(catalog, calibration, residuals)
    m = modelled_rate(job.shape, inst.accelerator.key, count * rk.per_node, job.batch, rk.unit, catalog,
                      calibration, fit, residuals)
    return m.rate, "model", m.words, m.band

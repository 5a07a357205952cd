"""The bundled, dated catalog: instance specs, On-Demand prices, Spot advisor data.

Pure data access over `catalog.json` (built by scripts/build_catalog.py); stdlib only.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

CATALOG_PATH = Path(__file__).with_name("catalog.json")

# Midpoints of the Spot advisor's interruption-frequency bands: share of instances reclaimed
# over a trailing month. ">20%" has no upper bound; 25% is a deliberately pessimistic midpoint.
BAND_MONTHLY_FRACTION = {"<5%": 0.025, "5-10%": 0.075, "10-15%": 0.125, "15-20%": 0.175, ">20%": 0.25}
HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class Accelerator:
    key: str
    name: str
    kind: str  # "gpu" | "neuron"
    peak_tflops: dict[str, float]
    efficiency: float
    intra_node_gbytes_s: float

    def supports(self, precision: str) -> bool:
        return precision in self.peak_tflops


@dataclass(frozen=True)
class InstanceType:
    name: str
    family: str
    accelerator: Accelerator
    accelerator_count: int
    accelerator_memory_gib: float
    vcpus: int
    ram_gib: float
    network_gbps_burst: float
    network_gbps_baseline: float
    network_up_to: bool
    efa_interfaces: int
    sagemaker_training: bool
    sources: str

    @property
    def efa(self) -> bool:
        return self.efa_interfaces > 0


@dataclass(frozen=True)
class SpotAdvice:
    savings_pct: float
    interruption_band: str

    @property
    def hourly_interruption_rate(self) -> float:
        """Per-instance hazard (interruptions per instance-hour) from the band's monthly share."""
        f = BAND_MONTHLY_FRACTION[self.interruption_band]
        return -math.log(1.0 - f) / HOURS_PER_MONTH


@dataclass(frozen=True)
class Price:
    usd_per_hour: float
    source: str


class Catalog:
    def __init__(self, data: dict):
        self.data = data
        self.date: str = data["catalog_date"]
        self.data_dates: dict[str, str] = data["data_dates"]
        self.sources: dict[str, str] = data["sources"]
        self.accelerators = {k: Accelerator(key=k, name=v["name"], kind=v["kind"], peak_tflops=v["peak_tflops"],
                                            efficiency=v["efficiency"], intra_node_gbytes_s=v["intra_node_gbytes_s"])
                             for k, v in data["accelerators"].items()}
        self.instances = {
            name: InstanceType(name=name, accelerator=self.accelerators[v["accelerator"]],
                               **{k: v[k] for k in ("family", "accelerator_count", "accelerator_memory_gib", "vcpus",
                                                    "ram_gib", "network_gbps_burst", "network_gbps_baseline",
                                                    "network_up_to", "efa_interfaces", "sagemaker_training",
                                                    "sources")})
            for name, v in data["instances"].items()}

    @property
    def families(self) -> list[str]:
        return sorted({i.family for i in self.instances.values()})

    @property
    def priced_regions(self) -> list[str]:
        return sorted(self.data["on_demand_usd_per_hour"])

    def instance(self, name: str) -> InstanceType | None:
        return self.instances.get(name.removeprefix("ml."))

    def on_demand_price(self, platform: str, region: str, instance_type: str) -> Price | None:
        entry = self.data["on_demand_usd_per_hour"].get(region, {}).get(instance_type)
        if not entry or platform not in entry:
            return None
        return Price(entry[platform], entry[f"{platform}_source"])

    def provenance(self) -> str:
        """Where an offline plan's figures come from: the catalog's dates, said once per plan."""
        dates = self.data_dates
        return (f"planned from the bundled catalog dated {self.date} (EC2 prices {dates['ec2_prices_us_east_1']} in "
                f"us-east-1, {dates['ec2_prices_other_regions']} elsewhere; SageMaker prices outside us-east-1 "
                f"derived, not verified; Spot advisor {dates['spot_advisor']}); no placement scores or quotas "
                "checked")

    def price_source_words(self, source: str) -> str:
        """A price source for people: its name, and whether it was read from AWS's own price data, with the
        catalog's key (`trainctl catalog` explains each key in full)."""
        key = source.split()[0] if source else source
        named = self.data.get("source_names", {}).get(key)
        if named is None:
            return source
        unverified = "" if named["verified"] or "NOT verified" in named["name"] else ", not verified against AWS"
        return f"{named['name']}{unverified} [{key}]"

    def spot_advice(self, region: str, instance_type: str) -> SpotAdvice | None:
        v = self.data["spot_advisor"]["regions"].get(region, {}).get(instance_type)
        return SpotAdvice(v["savings_pct"], v["interruption_band"]) if v else None

    def quota_group(self, instance_type: str) -> str:
        """The EC2 vCPU quota group: g, p, p5 (P5 Spot has its own quota: p5, p5e, p5en) or trn."""
        family = instance_type.removeprefix("ml.").split(".")[0]
        if family.startswith("trn"):
            return "trn"
        return "p5" if family.startswith("p5") else family[0]

    def ec2_quota(self, instance_type: str, market: str) -> tuple[str, str]:
        """(quota code, quota name) of the EC2 vCPU quota that a layout of this type draws on."""
        code, name = self.data["ec2_vcpu_quotas"][self.quota_group(instance_type)][market]
        return code, name


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    return Catalog(json.loads(CATALOG_PATH.read_text()))


# ----------------------------------------------------------------------------- calibration (published measurements)
CALIBRATION_PATH = Path(__file__).with_name("calibration.json")


@dataclass(frozen=True)
class DeviceSpec:
    """What the throughput model needs of one device beyond the catalog: memory bandwidth, the group whose
    calibrated efficiency it shares (the same die), and how many ranks the entrypoint runs per accelerator."""

    key: str
    group: str
    memory_gbytes_s: float
    peak_tflops: dict[str, float] | None   # None: the catalog's accelerator has it
    ranks_per_accelerator: int
    source: str
    memory_gib: float | None = None        # memory per accelerator (the plan's memory check of the published rows)
    tf32_tflops: float | None = None       # dense TF32 tensor-core peak: what PyTorch's fp32 matmuls and convolutions
                                           # run on where TF32 is allowed (Ampere and later); None: the die has none


@dataclass(frozen=True)
class ModelDims:
    family: str            # vision | language | cnn
    params: float
    forward_flops: float
    layers: int | None = None    # transformer shape; None for a convolutional network
    hidden: int | None = None
    heads: int | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class CalibrationRow:
    id: str
    model: str
    device: str
    precision: str
    micro_batch: int
    accumulation: int
    nodes: int
    ranks_per_node: int
    strategy: str             # ddp | fsdp
    checkpointing: bool
    attention: str            # eager (scores materialised) | fused (flash / SDPA / compiler)
    samples_per_s: float      # the whole layout, as published
    source: str
    conditions: str
    intra_gbytes_s: float = 0.0
    inter_gbps: float = 0.0
    transport: str = "efa"
    scaling_base: str | None = None   # the row whose layout is this one's scaling reference
    stack: str = "tuned"              # tuned (vendor-tuned recipe) | amp (plain PyTorch AMP) | compile (torch.compile)
    tf32: bool = False                # fp32 ran with TF32 allowed (NGC containers' default)
    memory_gib: float | None = None   # memory per accelerator where the card is larger than the device key's
    tensor_parallel: int = 1          # ranks of one node each layer was split over


@dataclass(frozen=True)
class Calibration:
    date: str
    sources: dict[str, str]
    devices: dict[str, DeviceSpec]
    shapes: dict[str, ModelDims]
    rows: tuple[CalibrationRow, ...]
    source_groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # resembling sources, held out together
    # published rows of models the throughput model cannot represent yet: scored by scripts/eval_model.py out of
    # source, never fitted (a model the fit cannot express would bend every other prediction towards it)
    check_rows: tuple[CalibrationRow, ...] = ()
    # source -> the scripts that produced its rows: ({models?, files: [{repo, path, commit, date, lines}]}, ...)
    code_evidence: dict[str, tuple[dict, ...]] = field(default_factory=dict)
    # (TF32 off, TF32 on) runs of one script, batch and GPU: they fit fp32 math's gain on the CUDA cores
    # (perf/fp32_math.py), never an efficiency, and are not scored
    tf32_pairs: tuple[tuple[CalibrationRow, CalibrationRow], ...] = ()

    def code_files(self, row: CalibrationRow) -> dict[str, str]:
        """{path: text} of the verbatim excerpts of the scripts that produced this row (empty when none is stored):
        what scripts/eval_model.py writes as the user's source_dir."""
        out: dict[str, str] = {}
        for entry in self.code_evidence.get(row.source, ()):
            if row.model in entry.get("models", (row.model,)):
                out |= {f["path"]: "\n".join(f["lines"]) + "\n" for f in entry["files"]}
        return out

    def device(self, key: str) -> DeviceSpec | None:
        return self.devices.get(key)

    def source_group(self, source: str) -> str:
        """The group of resembling sources a source belongs to (itself when it is in none)."""
        return next((g for g, members in self.source_groups.items() if source in members), source)


def parse_calibration(data: dict) -> Calibration:
    devices = {k: DeviceSpec(key=k, group=v["group"], memory_gbytes_s=v["memory_gbytes_s"],
                             peak_tflops=v.get("peak_tflops"), ranks_per_accelerator=v.get("ranks_per_accelerator", 1),
                             source=v["source"], tf32_tflops=v.get("tf32_tflops"),
                             memory_gib=v.get("memory_gib"))
               for k, v in data["devices"].items()}
    shapes = {k: ModelDims(**v) for k, v in data["model_shapes"].items()}
    rows = tuple(CalibrationRow(**r) for r in data["rows"])
    groups = {g: tuple(v["sources"]) for g, v in data.get("source_groups", {}).items()}
    checks = tuple(CalibrationRow(**r) for r in data.get("check_rows", ()))
    evidence = {k: tuple(v) for k, v in data.get("code_evidence", {}).items()}
    pairs = tuple((CalibrationRow(**p["tf32_off"]), CalibrationRow(**p["tf32_on"])) for p in data.get("tf32_pairs", ()))
    return Calibration(data["date"], data["sources"], devices, shapes, rows, groups, checks, evidence, pairs)


@lru_cache(maxsize=1)
def load_calibration() -> Calibration:
    return parse_calibration(json.loads(CALIBRATION_PATH.read_text()))


RESIDUALS_PATH = Path(__file__).with_name("calibration_fit.json")


@lru_cache(maxsize=1)
def load_calibration_residuals() -> dict:
    """The leave-one-out error quantiles scripts/eval_model.py wrote ({} before it ran): the throughput band."""
    if not RESIDUALS_PATH.exists():
        return {}
    return json.loads(RESIDUALS_PATH.read_text())

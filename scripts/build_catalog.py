#!/usr/bin/env python3
"""Assemble trainctl/catalog/catalog.json from the dated source files in scripts/catalog_sources/.

The catalog is data, not code: every number in it carries a source key, and the keys are
explained in the `sources` table. Re-run this script after changing a source file; the
output is committed so that trainctl itself never needs the sources at run time.
"""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "catalog_sources"
OUT = HERE.parent / "trainctl" / "catalog" / "catalog.json"

CATALOG_DATE = "2026-11-23"

SOURCES = {
    "K": "aws/karpenter-provider-aws website/content/en/docs/reference/instance-types.md @1d927085 (2026-08-21): "
         "DescribeInstanceTypes-derived vCPU, memory, accelerators, baseline network bandwidth, EFA",
    "K112": "aws/karpenter-provider-aws website/content/en/v1.12/reference/instance-types.md (p3.2xl/8xl/16xl)",
    "KP": "aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws.go, generated 2026-07-20 for "
          "us-east-1 from the AWS Pricing API (Linux On-Demand)",
    "AD": "awsdocs/amazon-ec2-user-guide accelerated-computing-instances.md @d2899614 (2023-05-11): network "
          "performance, 'up to' marks, baseline/burst table, EFA",
    "AD22": "awsdocs/amazon-ec2-user-guide accelerated-computing-instances.md @5bcb1f49 (2022-11-05): p3 network",
    "B": "AWS Batch User Guide 'Run GPU jobs': g6 network bandwidth, 24 GiB per L4/A10G",
    "N": "AWS Neuron docs, Trn1/Trn1n and Trainium architecture pages",
    "SM": "SageMaker training prices for us-east-1 transcribed by third parties from the AmazonSageMaker Price List "
          "offer file (read 2026-09-27); NOT verified against AWS",
    "SM3": "ml.p3.* prices seen identically in >=4 unrelated repositories; NOT verified against AWS",
    "V": "instances.vantage.sh data (generated from AWS's EC2 price list) as committed in tsaol/aws-gpu "
         "data/<family>_instances.js @77fcd9fe (files last updated 2026-01-21; the 2026-08-26 versions @18aebd1d/"
         "@299375be give the same prices for us-east-1, us-east-2 and us-west-2): Linux On-Demand per region",
    "SMF": "AWS's SageMaker price list for eu-central-1 (pricing.us-east-1.amazonaws.com/offers/v1.0/aws/"
           "AmazonSageMaker/current/eu-central-1/index.json, SKU VXE3WDJXX6P8ECXB, ml.g5.xlarge-Training 1.76 USD/h) as quoted, read "
           "2026-08-13, in a public repository's pricing report; not read from AWS by trainctl",
    "SMX": "DERIVED, NOT verified against AWS: the type's SageMaker us-east-1 price x (its EC2 price in the region / "
           "its EC2 price in us-east-1), assuming SageMaker keeps the EC2 regional ratio; checked at one published "
           "point (ml.g5.xlarge in eu-central-1: derived 1.7607, AWS 1.76, SMF)",
    "SA": "AWS Spot Instance Advisor feed spot-advisor-data.json as copied in alexei-led/spotinfo @5eedf20a "
          "(2025-06-28): savings % vs On-Demand and interruption-frequency band, per region, Linux",
    "NV": "NVIDIA data sheets: dense (no sparsity) tensor-core peak per GPU: A10G 70 bf16 / 31.2 fp32, L4 121 bf16 / "
          "30.3 fp32, V100 125 fp16 (no bf16) / 15.7 fp32, A100 312 bf16 / 19.5 fp32, H100 SXM 989 bf16 / 67 fp32",
    "NT": "AWS Neuron docs: Trainium1 190 TFLOPS bf16/fp16 and 47.5 TFLOPS fp32 per chip",
    "NB": "AWS Neuron performance tables: HF ViT-Base training on trn1.32xlarge about 5,233 samples/s (about 327/chip)",
    "TB": "timm benchmark CSV: ViT-B/16 training about 391 samples/s on an RTX 3090 (AMP, batch 192)",
    "ASSUMED": "trainctl's own modelling assumption; see docs/cost-model.md for the reasoning",
}

# What the plan prints for each price source, and whether the number was read from AWS's own price data
# (directly or through a tool that generates its table from AWS's Pricing API) or not.
SOURCE_NAMES = {
    "KP": ("AWS Pricing API through Karpenter's generated table, 2026-07-20", True),
    "V": ("AWS's EC2 price list through instances.vantage.sh, 2026-01-21", True),
    "SM": ("SageMaker us-east-1 price transcribed by third parties, NOT verified against AWS", False),
    "SM3": ("SageMaker us-east-1 price seen in several repositories, NOT verified against AWS", False),
    "SMF": ("AWS's SageMaker price list as quoted by a third party, 2026-08-13", False),
    "SMX": ("SageMaker price derived from us-east-1 by the EC2 regional ratio, NOT verified against AWS", False),
}
# Published regional SageMaker training prices (region, type) -> (USD/h, source): they replace the derivation.
SAGEMAKER_PUBLISHED = {("eu-central-1", "g5.xlarge"): (1.76, "SMF")}

# Per-accelerator facts the catalog CSV does not carry. Efficiency is the share of dense peak that
# a well-tuned training loop reaches (model FLOPs utilisation); intra_node_gbytes_s is the effective
# ring all-reduce bus bandwidth between the accelerators of one node.
ACCELERATORS = {
    "A10G": {"name": "NVIDIA A10G", "peak_tflops": {"bf16": 70.0, "fp16": 70.0, "fp32": 31.2},
             "efficiency": 0.40, "intra_node_gbytes_s": 12.0, "kind": "gpu",
             "sources": {"peak_tflops": "NV", "efficiency": "ASSUMED (TB: the same GA102 die at ~58% on an RTX 3090; "
                         "the 150 W A10G clocks lower)", "intra_node_gbytes_s": "ASSUMED (PCIe Gen4, no NVLink)"}},
    "L4": {"name": "NVIDIA L4", "peak_tflops": {"bf16": 121.0, "fp16": 121.0, "fp32": 30.3},
           "efficiency": 0.21, "intra_node_gbytes_s": 12.0, "kind": "gpu",
           "sources": {"peak_tflops": "NV", "efficiency": "ASSUMED (300 GB/s memory, half the A10G's, keeps "
                       "training near A10G speed)", "intra_node_gbytes_s": "ASSUMED (PCIe Gen4, no NVLink)"}},
    "V100": {"name": "NVIDIA V100", "peak_tflops": {"fp16": 125.0, "fp32": 15.7},
             "efficiency": 0.35, "intra_node_gbytes_s": 100.0, "kind": "gpu",
             "sources": {"peak_tflops": "NV", "efficiency": "ASSUMED", "intra_node_gbytes_s": "ASSUMED (NVLink 2)"}},
    "A100": {"name": "NVIDIA A100", "peak_tflops": {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5},
             "efficiency": 0.45, "intra_node_gbytes_s": 200.0, "kind": "gpu",
             "sources": {"peak_tflops": "NV", "efficiency": "ASSUMED", "intra_node_gbytes_s": "ASSUMED (NVSwitch)"}},
    "H100": {"name": "NVIDIA H100", "peak_tflops": {"bf16": 989.0, "fp16": 989.0, "fp32": 67.0},
             "efficiency": 0.40, "intra_node_gbytes_s": 350.0, "kind": "gpu",
             "sources": {"peak_tflops": "NV", "efficiency": "ASSUMED", "intra_node_gbytes_s": "ASSUMED (NVSwitch)"}},
    "Trainium1": {"name": "AWS Trainium (Trn1)", "peak_tflops": {"bf16": 190.0, "fp16": 190.0, "fp32": 47.5},
                  "efficiency": 0.18, "intra_node_gbytes_s": 100.0, "kind": "neuron",
                  "sources": {"peak_tflops": "NT", "efficiency": "NB (327 samples/s/chip x 105.6 GFLOP / 190 TFLOPS)",
                              "intra_node_gbytes_s": "ASSUMED (NeuronLink-v2)"}},
}

ACCEL_BY_CSV_NAME = {"NVIDIA A10G": "A10G", "NVIDIA L4": "L4", "NVIDIA V100": "V100", "NVIDIA A100": "A100",
                     "NVIDIA H100": "H100", "AWS Trainium": "Trainium1"}

# Baseline (sustained) bandwidth of the 'up to' links, in Gbps (SOURCES.md, K and AD).
BASELINE_GBPS = {"g5.xlarge": 2.5, "g5.2xlarge": 5.0, "g5.4xlarge": 10.0, "g6.xlarge": 2.5, "g6.2xlarge": 5.0,
                 "g6.4xlarge": 10.0, "trn1.2xlarge": 3.125, "p3.2xlarge": 2.5}

# SageMaker training offers these instance types as ml.<type> (all of the catalog's but p5's smaller sizes).
SAGEMAKER_TRAINING = re.compile(r"^(g5|g6|p3|p3dn|p4d|p5|trn1|trn1n)\.")

# EC2 vCPU quota groups (Service Quotas, service code ec2), matched by QuotaCode: "Amazon EC2 instance type
# quotas" (EC2 instance types guide). P5 Spot has its own quota; P5 On-Demand shares "Running On-Demand P".
QUOTA_GROUPS = {
    "g": {"on-demand": ["L-DB2E81BA", "Running On-Demand G and VT instances"],
          "spot": ["L-3819A6DF", "All G and VT Spot Instance Requests"]},
    "p": {"on-demand": ["L-417A185B", "Running On-Demand P instances"],
          "spot": ["L-7212CCBC", "All P4, P3 and P2 Spot Instance Requests"]},
    "p5": {"on-demand": ["L-417A185B", "Running On-Demand P instances"],
           "spot": ["L-C4BD4855", "All P5 Spot Instance Requests"]},
    "trn": {"on-demand": ["L-2C3B7624", "Running On-Demand Trn instances"],
            "spot": ["L-6B0D517C", "All Trn Spot Instance Requests"]},
}


def number(cell: str) -> float | None:
    m = re.match(r"^\s*([0-9.]+)", cell)
    return float(m.group(1)) if m else None


def _regional_prices(prices: dict[str, dict[str, dict]], instances: dict) -> None:
    """EC2 prices of every commercial region that offers the type (V), and SageMaker prices there: published
    where a source has them, else derived from us-east-1 by the EC2 ratio (SMX, marked unverified)."""
    with open(SRC / "ec2_prices_regional.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["instance"] in instances]  # p5.4xlarge: priced, no specs
    us_east_1 = prices["us-east-1"]
    for row in rows:
        itype, region = row["instance"], row["region"]
        if region == "us-east-1":
            continue  # KP (the Pricing API through Karpenter) is newer; the two agree (SOURCES.md)
        entry = prices.setdefault(region, {}).setdefault(itype, {})
        entry.update({"ec2": float(row["usd_per_hour"]), "ec2_source": "V"})
        base = us_east_1.get(itype, {})
        if (region, itype) in SAGEMAKER_PUBLISHED:
            entry["sagemaker"], entry["sagemaker_source"] = SAGEMAKER_PUBLISHED[(region, itype)]
        elif "sagemaker" in base and base.get("ec2"):
            entry["sagemaker"] = round(base["sagemaker"] * entry["ec2"] / base["ec2"], 4)
            entry["sagemaker_source"] = "SMX"
    for (region, itype), (usd, _) in SAGEMAKER_PUBLISHED.items():
        base = us_east_1[itype]
        derived = base["sagemaker"] * prices[region][itype]["ec2"] / base["ec2"]
        print(f"check: ml.{itype} in {region}: derived {derived:.4f}, published {usd}")


def main(out: Path = OUT) -> None:
    instances = {}
    prices: dict[str, dict[str, dict]] = {}
    with open(SRC / "instances.csv") as f:
        for row in csv.DictReader(f):
            itype = row["instance"]
            accel = next(v for k, v in ACCEL_BY_CSV_NAME.items() if row["accel"].startswith(k))
            efa_cell = row["efa"]
            efa_count = int(re.search(r"(\d+) EFA", efa_cell).group(1)) if "EFA" in efa_cell else (
                1 if efa_cell.startswith("yes") else 0)
            burst = float(row["network_gbps"])
            up_to = row["network_up_to"] == "yes"
            baseline = BASELINE_GBPS.get(itype, burst)
            if up_to and itype not in BASELINE_GBPS:
                raise SystemExit(f"{itype}: 'up to' link without a known baseline")
            src = row["source"].split(";")
            instances[itype] = {
                "family": itype.split(".")[0],
                "accelerator": accel,
                "accelerator_count": int(row["accel_count"]),
                "accelerator_memory_gib": float(row["accel_mem_gib"]),
                "vcpus": int(row["vcpus"]),
                "ram_gib": float(row["ram_gib"]),
                "network_gbps_burst": burst,
                "network_gbps_baseline": baseline,
                "network_up_to": up_to,
                "efa_interfaces": efa_count,
                "sagemaker_training": bool(SAGEMAKER_TRAINING.match(itype)),
                "sources": "; ".join(src),
            }
            ec2 = number(row["ec2_od_usd_hr_us_east_1"])
            sm_cell = row["sagemaker_od_usd_hr_us_east_1"]
            sm = number(sm_cell)
            sm_src = [s for s in src if s.startswith("SM")]
            entry = {"ec2": ec2, "ec2_source": "KP"}
            if sm is not None:
                entry["sagemaker"] = sm
                entry["sagemaker_source"] = (sm_src[0] if sm_src else "SM") + (
                    " (unverified)" if "unverified" in sm_cell else "")
            prices.setdefault("us-east-1", {})[itype] = entry
    _regional_prices(prices, instances)
    advisor = json.loads((SRC / "spot-advisor-gpu-subset.json").read_text())
    bands = [r["label"] for r in advisor["ranges"]]
    spot = {region: {t: {"savings_pct": v["s"], "interruption_band": bands[v["r"]]} for t, v in sorted(types.items())
                     if t in instances}
            for region, types in sorted(advisor["spot_advisor"].items())}
    catalog = {
        "catalog_date": CATALOG_DATE,
        "data_dates": {"instance_specs": "2026-08-21", "ec2_prices_us_east_1": "2026-07-20",
                       "ec2_prices_other_regions": "2026-01-21", "sagemaker_prices": "2026-09-27",
                       "spot_advisor": "2025-06-28"},
        "sources": SOURCES,
        "source_names": {k: {"name": name, "verified": ok} for k, (name, ok) in SOURCE_NAMES.items()},
        "accelerators": ACCELERATORS,
        "instances": instances,
        "on_demand_usd_per_hour": prices,
        "spot_advisor": {"source": "SA", "bands": bands, "regions": spot},
        "ec2_vcpu_quotas": QUOTA_GROUPS,
    }
    out.write_text(json.dumps(catalog, indent=1, sort_keys=False) + "\n")
    print(f"wrote {out} ({len(instances)} instance types, {len(prices)} priced regions, {len(spot)} Spot regions)")


if __name__ == "__main__":
    import sys

    # `--out PATH` writes elsewhere (the tests check that the committed catalog is what its sources give)
    main(Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else OUT)

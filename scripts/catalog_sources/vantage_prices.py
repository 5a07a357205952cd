#!/usr/bin/env python3
"""Write ec2_prices_regional.csv from a checkout of github.com/tsaol/aws-gpu (its data/<family>_instances.js files are
generated from instances.vantage.sh, which reads AWS's EC2 price list: Linux On-Demand $/h per region).

    git clone https://github.com/tsaol/aws-gpu /tmp/aws-gpu
    python3 scripts/catalog_sources/vantage_prices.py /tmp/aws-gpu

Only commercial regions (partition `aws`) are kept: GovCloud (us-gov-*) is another partition with other accounts, and
Local Zones (us-west-2-lax-1) are not regions a plan can name. scripts/build_catalog.py reads the CSV; the families
are the catalog's (instances.csv)."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAMILIES = ("g5", "g6", "p3", "p3dn", "p4d", "p5", "trn1", "trn1n")
REGION = re.compile(r"^(us|eu|ap|ca|sa|me|il|af|mx)-[a-z]+-\d$")


def main(checkout: str) -> None:
    repo = Path(checkout)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    rows = []
    for family in FAMILIES:
        path = f"data/{family}_instances.js"
        text = (repo / path).read_text()
        updated = re.search(r"Last updated: (\d{4}-\d\d-\d\d)", text).group(1)
        for inst in json.loads(text[text.index("["):text.rindex("]") + 1]):
            for region, price in sorted(inst["pricing"].items()):
                if REGION.match(region) and not region.startswith("us-gov-") and "onDemand" in price:
                    rows.append({"instance": inst["apiName"], "region": region, "usd_per_hour": price["onDemand"],
                                 "file": path, "file_commit": commit, "last_updated": updated})
    rows.sort(key=lambda r: (r["instance"], r["region"]))
    with open(HERE / "ec2_prices_regional.csv", "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=list(rows[0]))
        out.writeheader()
        out.writerows(rows)
    print(f"wrote {len(rows)} prices for {len({r['region'] for r in rows})} regions")


if __name__ == "__main__":
    main(sys.argv[1])

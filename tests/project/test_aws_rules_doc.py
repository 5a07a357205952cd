"""docs/aws-rules.md stays true to the code: every test it names exists (tests moved into tier folders left 14 rows
pointing at files that were gone), a `file::test` names a test of that file, and no rule row is there twice (a
corrected row and its stale twin stood side by side twice)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "aws-rules.md").read_text()
NAMED = re.compile(r"(?<![\w/.-])((?:sandbox/)?tests/[\w/]+\.py)(?:::(\w+))?")


def test_every_test_the_rules_name_exists():
    missing = []
    for path, test in sorted(set(NAMED.findall(DOC))):
        file = ROOT / path
        if not file.is_file():
            missing.append(path)
        elif test and not re.search(rf"def {test}\(", file.read_text()):
            missing.append(f"{path}::{test}")
    assert missing == [], missing


def test_no_rule_row_is_there_twice():
    rows = [line for line in DOC.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    twice = sorted({row[:120] for row in rows if rows.count(row) > 1})
    assert twice == [], twice

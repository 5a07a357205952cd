"""`launch --buy-capacity-block` asks for a Capacity Block: when the chosen option is another market, the launch is
refused in one line before any AWS call, instead of running on that market unasked."""
from __future__ import annotations

from tests.support.helpers import CONFIGS, run_cli


def test_the_buy_flag_on_an_option_that_is_no_block_is_refused_in_one_line(tmp_path):
    proc = run_cli(["launch", str(CONFIGS / "vit-base-g5.yaml"), "--offline", "--buy-capacity-block", "--yes"],
                   tmp_path / "home")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    (line,) = proc.stderr.strip().splitlines()
    assert "--buy-capacity-block: the chosen option 1 is" in line and "not a capacity block" in line

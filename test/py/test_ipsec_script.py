"""scripts/ipsec_experiments.py (issue 22) still runs end to end: its --quick form, in the
testbed, writes its CSVs and table, and weir's per-SA loss equals the loss injected before
it."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from weirtb.esp import esptun_binary  # noqa: E402


def test_ipsec_script_quick(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    if not esptun_binary().exists():
        pytest.skip(f"{esptun_binary()} not built (needs libcrypto: libssl-dev)")
    out = tmp_path / "ipsec"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "ipsec_experiments.py"), "--quick",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (row,) = list(csv.DictReader((out / "loss.csv").open()))
    assert row["intact"] == "True"
    assert int(row["out_injected"]) > 0 and row["out_weir_lost"] == row["out_injected"], row
    assert row["in_weir_lost"] == row["in_injected"], row
    good = list(csv.DictReader((out / "goodput.csv").open()))
    assert {g["gateway"] for g in good} == {"weir", "linux-bridge"}
    assert all(g["ok"] == "True" for g in good)
    assert "weir / Linux bridge" in (out / "ipsec.md").read_text()

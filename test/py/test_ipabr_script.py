"""scripts/ipabr_experiments.py (seed 000's chapter 7 in the testbed) still runs end to end:
its --quick form writes its CSVs, plots and table, and ipabr's row shows what the mode is
for (no retransmission, delivery latency far below HTB's)."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_ipabr_experiments_quick(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    out = tmp_path / "ipabr"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "ipabr_experiments.py"),
                        "droptail", "--quick", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {row["mode"]: row for row in csv.DictReader(open(out / "droptail.csv"))}
    assert set(rows) == {"ipabr", "htb"}, rows
    for name in ("droptail.png", "droptail_series.csv", "droptail_esdl.csv", "README-table.md"):
        assert (out / name).exists(), name
    ia, htb = rows["ipabr"], rows["htb"]
    assert int(ia["segments"]) > 500 and int(ia["iperf_errors"]) == 0, ia
    assert float(ia["esdl_mean_ms"]) < float(htb["esdl_mean_ms"]), (ia, htb)
    assert "| ipabr |" in (out / "README-table.md").read_text()

"""scripts/soak.py (issue 16.9's long soak) still runs end to end: its --quick form (25 s,
a 128-flow table filled twice by UDP bursts beside short and long TCP flows) writes its
CSV, plot and summary, and its checks hold: the counters add up, weir forwards after,
exits 0 (every mbuf back), and its RSS does not grow once the table has been full."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_soak_script_quick(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    out = tmp_path / "soak"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "soak.py"), "--quick",
                        "--out", str(out)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    rows = list(csv.DictReader((out / "soak.csv").open()))
    assert len(rows) >= 15, len(rows)
    assert int(rows[-1]["flows_full"]) > 0          # the table did fill
    assert int(rows[-1]["flows_inserted"]) > 128    # and was reused past its capacity
    res = json.loads((out / "summary.json").read_text())["result"]
    # A few pages of slack: glibc and the stats writer may touch one more page.
    assert res["rss_growth_after_full_kb"] <= 256, res
    assert (out / "soak.png").stat().st_size > 10_000

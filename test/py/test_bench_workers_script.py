"""scripts/bench_workers.py (issue 18's two workers against one) still runs end to end:
its --quick form (pfq, one round, 6 s per worker count) in the testbed writes its CSV
and table, both runs carry the class, and no flow is split over the workers."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_bench_workers_quick(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    out = tmp_path / "workers"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_workers.py"), "--quick",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = list(csv.DictReader(open(out / "workers.csv")))
    assert [(x["mode"], x["workers"]) for x in rows] == [("pfq", "1"), ("pfq", "2")], rows
    for x in rows:
        # 4 uploads in a 20 Mbit/s class: at most ~18.8 Mbit/s of TCP payload.
        assert 15.0 <= float(x["goodput_mbit"]) <= 20.0, x
        assert int(x["flow_split"]) == 0, x
        assert 0 < float(x["weir_cpu"]) < 2.0, x
    parts = [float(p) for p in rows[1]["placement"].split("/")]
    assert len(parts) == 2 and abs(sum(parts) - 1) <= 0.02, rows[1]
    assert "| pfq | 2 |" in (out / "workers.md").read_text()

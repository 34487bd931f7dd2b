"""scripts/fct.py (issue 23's measurement) still runs end to end: its --quick form, in
the testbed, writes its CSV and table."""
import csv
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_fct_script_quick(tmp_path):
    import os
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    out = tmp_path / "fct"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "fct.py"), "fct", "--quick",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = (out / "fct.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 2 * 2, rows     # header + 2 modes x (idle, 2 bulk) x 2 transfers
    assert "| tcr |" in (out / "fct.md").read_text()
    # The bulk streams' share beside the transfers: both streams carried data.
    bulk = list(csv.DictReader((out / "fct-bulk.csv").open()))
    assert [r["mode"] for r in bulk] == ["pfq", "tcr"], bulk
    for r in bulk:
        assert int(r["streams"]) == 2 and float(r["min_mbit"]) > 0.5, r
        assert 0.5 <= float(r["jain"]) <= 1.0, r

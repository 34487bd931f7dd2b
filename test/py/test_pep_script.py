"""scripts/pep_experiments.py (issue 20's Sec. IV reproduction) still runs end to end: its
--quick form, in the testbed, writes its CSV, table and figure, and pep's slow start beats
the plain path's (the paper's Fig. 5: the one claim a 5-second run can check)."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_pep_experiments_quick(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    out = tmp_path / "pep"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "pep_experiments.py"), "--quick",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {row["mode"]: row for row in csv.DictReader(open(out / "pep.csv"))}
    assert set(rows) == {"none", "pep"}, rows
    assert (out / "pep.png").stat().st_size > 0
    assert "| const-d200 | paper |" in (out / "pep.md").read_text()
    # Premature ACKs double the window every ~1 ms instead of every ~420 ms.
    assert float(rows["pep"]["first_s_mbit"]) > 1.2 * float(rows["none"]["first_s_mbit"]), rows
    assert int(rows["pep"]["give_ups"]) == 0

"""scripts/lastmile_experiments.py (issue 22: the thesis' slow-link test bed) still runs end to
end: its --quick form, in the testbed, writes its CSV and table, and weir's clamp acted in the
clamp+exempt run only."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_lastmile_script_quick(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    out = tmp_path / "lm"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "lastmile_experiments.py"),
                        "--quick", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = list(csv.DictReader((out / "lastmile.csv").open()))
    assert [x["variant"] for x in rows] == ["plain", "clamp+exempt"], rows
    plain, lm = rows
    assert int(plain["lm_clamped"]) == 0 and int(plain["lm_exempt"]) == 0
    assert int(lm["lm_clamped"]) > 0 and int(lm["lm_exempt"]) > 0, lm
    # The slow flow moved data over its 56 kbit/s last hop in both runs.
    assert 5 < float(plain["slow_goodput_kbps"]) <= 56 and 5 < float(lm["slow_goodput_kbps"]) <= 56
    assert "| slow | 3 | clamp+exempt |" in (out / "lastmile.md").read_text()

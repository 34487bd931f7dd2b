"""scripts/lastmile_experiments.py (seed 002: the thesis' slow-link test bed) still runs end to
end: its --quick form, in the testbed, writes its CSV and table; weir's clamp acts only where
configured, and the thesis' Table 3.10 holds in short form: a ~1 KB window cuts the slow
flow's loss at its 3-packet last hop (thesis 6.2 % -> 1.6 %)."""
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
    assert [x["variant"] for x in rows] == ["plain", "clamp1k", "clamp+exempt"], rows
    plain, k1, lm = rows
    assert int(plain["lm_clamped"]) == 0 and int(plain["lm_exempt"]) == 0
    assert int(lm["lm_clamped"]) > 0 and int(lm["lm_exempt"]) > 0, lm
    assert int(k1["lm_clamped"]) > 0 and int(k1["lm_exempt"]) == 0, k1
    # Reno fills a 3-packet hop and loses; a window under the pipe rarely does.
    assert float(plain["slow_loss_pct"]) > 2.0, plain
    assert float(k1["slow_loss_pct"]) < 0.6 * float(plain["slow_loss_pct"]), (k1, plain)
    # The slow flow moved data over its 56 kbit/s last hop in both runs.
    assert all(5 < float(x["slow_goodput_kbps"]) <= 56 for x in rows), rows
    assert "| slow | 3 | clamp+exempt |" in (out / "lastmile.md").read_text()

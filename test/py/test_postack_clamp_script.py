"""scripts/postack_clamp.py (PostACK's share clamp before and after, issue 19 item 5) still
runs end to end: its --quick form (case a, 8 s a run) writes its CSV and table, and the
clamp's row shows what it is for: the senders' srtt far below the unclamped run's."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_postack_clamp_quick(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    out = tmp_path / "clamp"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "postack_clamp.py"), "--quick",
                        "--out", str(out)], capture_output=True, text=True, timeout=200)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {row["clamp"]: row for row in csv.DictReader(open(out / "clamp-a.csv"))}
    assert set(rows) == {"off", "on"}, rows
    assert "| a |" in (out / "clamp-a.md").read_text()
    off, on = rows["off"], rows["on"]
    assert int(on["win_clamped"]) > 0 and int(off["win_clamped"]) >= 0, (off, on)
    assert float(on["sender_srtt_ms"]) * 3 < float(off["sender_srtt_ms"]), (off, on)
    assert float(on["goodput_kbps"]) > 0.8 * float(on["target_kbps"]), on

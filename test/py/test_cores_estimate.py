"""scripts/cores_estimate.py still works on the committed weir-bench runs
(docs/results/workers/bench-*.json), and its arithmetic holds: more line rate needs
at least as many cores, IMIX never more than 64 B, and one core's frame rate
matches the cycles and clock it was computed from."""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "results" / "workers"


def test_cores_estimate_from_committed_runs(tmp_path):
    runs = sorted(RESULTS.glob("bench-*.json"))
    assert runs, "no committed weir-bench runs"
    cp = subprocess.run([sys.executable, str(REPO / "scripts" / "cores_estimate.py"),
                         "--from-json", *map(str, runs), "--out", str(tmp_path)],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    md = (tmp_path / "cores.md").read_text()
    ghz = float(re.search(r"TSC ([\d.]+) GHz", md).group(1))
    io_ns = float(re.search(r"I/O (\d+) ns", md).group(1))
    rows = [l.split("|")[1:-1] for l in md.splitlines()
            if l.startswith("| ") and l.split("|")[1].strip().isdigit()]
    assert len(rows) >= 3 * 5, md
    for r in rows:
        cyc = float(r[2].split()[0])
        ns, mpps = float(r[3]), float(r[4])
        cores = [int(x) for x in r[5:11]]
        assert abs(ns - (cyc / ghz + io_ns)) <= 1, r
        assert abs(mpps - 1e3 / ns) <= 0.01 + 0.01 * mpps, r
        b64, imix = cores[:3], cores[3:]
        assert b64 == sorted(b64) and imix == sorted(imix), r
        assert all(i <= b for i, b in zip(imix, b64)) and all(c >= 1 for c in cores), r

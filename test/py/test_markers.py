"""DiffServ markers (docs/markers.md) on the real binaries: the config's refusals at
FILE:LINE, weir-wanemu's RIO arguments, and scripts/marker_experiments.py --quick
end to end in the testbed (real TCP through weir's markers into a RIO core: both code
points reach the core, Out is dropped first, the contracts of the small aggregates are
met in profile)."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build"))
WEIR = BUILD / "app" / "weir" / "weir"
WANEMU = BUILD / "app" / "wanemu" / "weir-wanemu"

sys.path.insert(0, str(REPO / "scripts"))
from weirtb import weir_config_text  # noqa: E402


def check(tmp_path, marker, extra=""):
    text = weir_config_text("net_null0", "net_null1", prefix="wmk-cfg", mem_mb=128,
                            eal_log_level=None, body="flows = { capacity = 1024; };\n")
    text += f"""
shaping = {{
  outbound = {{
    rate = "30mbit";
    default = "a";
    classes = (
      {{ name = "a"; rate = "10mbit"; {extra}
        marker = {marker}; }}
    );
  }};
}};
"""
    cfg = tmp_path / "m.cfg"
    cfg.write_text(text)
    p = subprocess.run([str(WEIR), "--", "--config", str(cfg), "--check"], capture_output=True,
                       text=True, timeout=30)
    return cfg, p, text


def line_of(text, needle):
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


@pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}")
@pytest.mark.parametrize("marker,extra,needle,at", [
    ('{ type = "tbq"; cir = 0; }', "", "needs a contract rate cir above 0", "name ="),
    ('{ type = "tb"; cir = "40mbit"; }', "", "above what the class can send", "name ="),
    ('{ type = "carm"; cir = "12mbit"; }', 'ceil = "10mbit";', "above what the class can send",
     "name ="),
    ('{ type = "srtcm"; cir = "5mbit"; queue = 5; }', "", "for tbq and tbq-ld only", "name ="),
    ('{ type = "tbq"; cir = "5mbit"; cbs = 100; }', "", "marker 'cbs' must be", "marker ="),
    ('{ type = "bogus"; cir = "5mbit"; }', "", "marker 'type' must be", "marker ="),
    ('{ cir = "5mbit"; }', "", "needs a type", "marker ="),
    ('{ type = "carm"; cir = "5mbit"; alpha = 3.0; }', "", "marker 'alpha' must be", "marker ="),
])
def test_marker_config_refused(tmp_path, marker, extra, needle, at):
    cfg, p, text = check(tmp_path, marker, extra)
    assert p.returncode != 0
    first = p.stderr.strip().splitlines()[0]
    assert first.startswith(f"{cfg}:{line_of(text, at)}:"), first
    assert needle in first, first


@pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}")
def test_marker_config_ok(tmp_path):
    # A class that borrows (no ceil: the link's) may mark up to what it can reach.
    for m in ('{ type = "tbq"; cir = "20mbit"; rtt_ms = 70; capped = true; }',
              '{ type = "tbq-ld"; cir = "8mbit"; queue = 40; min_thresh = 10; }',
              '{ type = "trtcm"; cir = "8mbit"; pir = "12mbit"; color_aware = true; '
              'green = "AF21"; yellow = "AF22"; red = "AF23"; }',
              '{ type = "arm"; cir = "8mbit"; alpha = 0.05; window_ms = 1000; }'):
        _, p, _ = check(tmp_path, m)
        assert p.returncode == 0, (m, p.stderr)


@pytest.mark.skipif(not WANEMU.exists(), reason=f"weir-wanemu not built at {WANEMU}")
@pytest.mark.parametrize("args,needle", [
    (["--path", "x,rio=150:300:0.1:50:250:0.15"], "rio= needs rate="),
    (["--path", "x,rate=1mbit,rio=150:300:0.1"], "bad value for rio"),
    (["--path", "x,rate=1mbit,rio=150:300:0.1:200:250:0.15"], "Out's thresholds"),
    (["--path", "x,rate=1mbit,rio=150:300:0.1:50:250:0.15,rio_in=AF99"], "bad value for rio_in"),
    (["--path", "x", "--core", "rate=1mbit", "--core", "rate=2mbit"], "given twice"),
])
def test_wanemu_rio_args(args, needle):
    p = subprocess.run([str(WANEMU), "--weir", "y", *args], capture_output=True, text=True,
                       timeout=10)
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr.splitlines()[0], p.stderr


def test_marker_experiments_quick(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    out = tmp_path / "markers"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "marker_experiments.py"),
                        "--quick", "--out", str(out)], capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert len(rows) == 2 * 3, rows     # tb and tbq x three aggregates
    for row in rows:
        green, contract = float(row["green_mbit"]), float(row["contract_mbit"])
        # In profile never above the contract (the bucket's depth aside)...
        assert green <= contract * 1.05, row
        assert float(row["goodput_mbit"]) > 0.5, row
    # ...and the 2 Mbit/s aggregate, whose fair share is far above it, gets all of it.
    for row in rows:
        if row["agg"] == "a2":
            assert float(row["green_mbit"]) > 0.9 * 2, row
    core = json.loads((out / "core.json").read_text())
    for c in core:
        # Both code points reach the core (the rewrite is on the wire, checksums good
        # enough for TCP), and RIO drops Out first.
        assert c["rx_in"] > 0 and c["rx_out"] > 0, c
        assert c["dropped_out"] > c["dropped_in"], c
    assert "| exact | tbq |" in (out / "table.md").read_text()


def test_marker_sweep_quick(tmp_path):
    """scripts/marker_sweep.py (Figs. 4.3 / 4.12) end to end, one contract, tb and tbq."""
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    out = tmp_path / "sweep"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "marker_sweep.py"),
                        "--quick", "--out", str(out)], capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = list(csv.DictReader(open(out / "sweep.csv")))
    assert [row["marker"] for row in rows] == ["tb", "tbq"], rows
    for row in rows:
        # The contracted aggregate gets its 2 Mbit/s in profile (its share of the core is
        # far above it), never more green than the contract; the unmarked one gets some too.
        green = float(row["green_mbit"])
        assert 0.9 * 2 < green <= 2 * 1.05, row
        assert float(row["background_mbit"]) > 0.5, row
        assert int(row["dropped_out"]) > int(row["dropped_in"]), row
    assert "| 2 | tbq |" in (out / "sweep.md").read_text()


def test_marker_sweep_carm_arm_claims(tmp_path):
    """Seed 004, Sec. 4.4 (Figs. 4.12, 4.14-4.15) in a short form: with an aggregate that
    sends above its contract, CARM marks in profile at the contract (its loop compares the
    green rate with A), ARM marks in profile below it (its loop compares the total rate,
    so the excess pulls the token rate under A) while the aggregate still gets A."""
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    out = tmp_path / "sweep"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "marker_sweep.py"),
                        "--contracts", "2", "--markers", "carm,arm", "--seconds", "12",
                        "--warm", "5", "--flow-scale", "0.1", "--runs", "1", "--spread", "2",
                        "--out", str(out)], capture_output=True, text=True, timeout=150)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {row["marker"]: row for row in csv.DictReader(open(out / "sweep.csv"))}
    assert set(rows) == {"carm", "arm"}, rows
    carm, arm = rows["carm"], rows["arm"]
    # CARM: green within 10 % of the 2 Mbit/s contract, the aggregate above it.
    assert 0.9 * 2 < float(carm["green_mbit"]) < 1.1 * 2, carm
    assert float(carm["goodput_mbit"]) > 2, carm
    # ARM: in profile well below the contract, though the aggregate gets more than A.
    assert float(arm["green_mbit"]) < 0.8 * 2, arm
    assert float(arm["green_mbit"]) < 0.85 * float(carm["green_mbit"]), (arm, carm)
    assert float(arm["goodput_mbit"]) > 2, arm

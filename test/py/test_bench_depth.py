"""weir-bench --depth: "+pfq" on a congested link (issue 23's steady-state cost). A
standing backlog kept through the timed part keeps flows listed far less often than
once a frame, and the trees end with the backlog they started with (no frame lost;
CoDel off, as its drops of a standing queue would be right);
without it every burst empties the tree and nearly every frame lists its flow. Counts,
not timings: the cost itself is measured by hand (docs/results/bench/newflows-codel.md)."""
import json
import subprocess

from weirtb.topology import build_dir


def bench(*args):
    argv = [str(build_dir() / "app" / "bench" / "weir-bench"), "--no-huge", "-m", "512",
            "--no-pci", "-l", "0", "--file-prefix", "bench-depth", "--log-level=error", "--",
            "--flows", "1000", "--packets", "200000", "--modes", "+pfq", "--no-codel", "--json",
            *args]
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr[-2000:]
    rows = json.loads(cp.stdout[cp.stdout.index("["):])
    return next(r for r in rows if r["mode"] == "+pfq")


def test_depth_keeps_flows_backlogged():
    deep = bench("--depth", "16384")
    assert deep["depth"] == 16384 and deep["backlog"] == 16384, deep
    assert deep["new_per_pkt"] < 0.05, deep
    shallow = bench()
    assert "depth" not in shallow and shallow["new_per_pkt"] > 10 * deep["new_per_pkt"], shallow
    plain = bench("--depth", "16384", "--no-newflows")
    assert plain["new_per_pkt"] == 0 and plain["backlog"] == 16384, plain


def test_depth_bad_value_is_refused():
    argv = [str(build_dir() / "app" / "bench" / "weir-bench"), "--no-huge", "-m", "512",
            "--no-pci", "-l", "0", "--file-prefix", "bench-depth", "--log-level=error", "--",
            "--depth", "99999999"]
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert cp.returncode != 0 and "--depth" in cp.stderr, (cp.returncode, cp.stderr)

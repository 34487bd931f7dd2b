#!/usr/bin/python3
"""Two workers against one in the testbed (issue 18): TCP goodput and weir's busy time
per frame, mode by mode, rounds interleaved so the VM's speed swings hit both alike.

For each round, each mode and each worker count (1, then 2): weir in the testbed with
that many workers (2: af_packet qpairs=2, ports.distribution = "kernel-fanout", the
kernel's hash places the flows), one class of --rate each way in that mode, --flows
iperf3 uploads for --seconds. Goodput: the flows' steady state (from the 4th second),
Jain's index over them. Busy time per frame: the workers' busy seconds (iterations that
moved frames) over the frames weir received, both as deltas over the transfer. Also:
weir's CPU use (its process's user + system time over the run's wall time) and each
worker's part of the uploads' bytes (where the kernel's hash put them).

Usage (as root):
  scripts/bench_workers.py --modes pfq,postack,tcr --rate 20mbit --rounds 3 --out docs/results/workers
  scripts/bench_workers.py --quick --out /tmp/workers     # one mode, one round, 6 s
Writes OUT/workers.csv and OUT/workers.md (medians, and 2 workers / 1 worker ratios).
"""
import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.traffic import jain, steady_bps  # noqa: E402


def totals(st):
    busy = sum(w["busy_s"] for w in st["workers"])
    rx = st["ports"]["lan"]["rx"] + st["ports"]["wan"]["rx"]
    return busy, rx


def cpu_s(pid):
    """User + system CPU seconds of process pid so far (ip netns exec execs weir)."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def class_bytes(st, workers):
    """Bytes each worker sent in the outbound class so far (the uploads' data)."""
    c = st["shaping"]["outbound"]["classes"]["default"]
    per = c.get("per_worker") or [{"bytes": c["bytes"]}]
    return [w["bytes"] if w else 0 for w in per][:workers]


def one_run(tb, cfg_dir, mode, rate, workers, flows, seconds, burst_us):
    shaping = "" if rate == "none" else \
        f'shaping = {{ mode = "{mode}"; outbound = "{rate}"; inbound = "{rate}"; ' \
        f'burst_us = {burst_us}; }};\n'
    cfg = cfg_dir / f"{mode}-{workers}.cfg"
    cfg.write_text(weirtb.testbed_config_text(shaping, stats_interval=0.5, workers=workers))
    os.environ["WEIR_TESTBED_CFG"] = str(cfg)
    tb.start_gateway("weir")
    pid = tb._procs["weir"].pid
    b0, r0 = totals(tb.weir_stats())
    c0, t0 = cpu_s(pid), time.monotonic()
    y0 = class_bytes(tb.weir_stats(), workers)
    res = tb.iperf(n=flows, duration=seconds)
    time.sleep(0.6)             # one more stats interval
    st = tb.weir_stats()
    b1, r1 = totals(st)
    y = [b - a for a, b in zip(y0, class_bytes(st, workers))]
    cpu = (cpu_s(pid) - c0) / (time.monotonic() - t0)
    errs = [f.error for f in res if f.error]
    if errs:
        raise RuntimeError(f"{mode} {workers}w: {errs}")
    steady = [steady_bps(f.interval_bps, 3, seconds) for f in res]
    split = sum(p["flow_split"] for p in st["ports"].values())
    return {"mode": mode, "workers": workers, "goodput_mbit": round(sum(steady) / 1e6, 3),
            "jain": round(jain(steady), 4), "frames": r1 - r0,
            "busy_ns_per_frame": round((b1 - b0) * 1e9 / max(1, r1 - r0), 1),
            "weir_cpu": round(cpu, 3),
            # Each worker's part of the uploads' bytes: where the kernel's hash put
            # them (0.75/0.25 for 3 flows on one worker and 1 on the other).
            "placement": "/".join(f"{b / max(1, sum(y)):.2f}" for b in y),
            "flow_split": split}


def table(rows, modes):
    out = ["| mode | workers | goodput Mbit/s (median) | Jain | busy ns/frame (median, spread) "
           "| weir CPU (median) | bytes per worker, each run | goodput 2w/1w | ns/frame 2w/1w |",
           "|---|---|---|---|---|---|---|---|---|"]
    for m in modes:
        med = {}
        for w in (1, 2):
            rs = [r for r in rows if r["mode"] == m and r["workers"] == w]
            if not rs:
                continue
            ns = [r["busy_ns_per_frame"] for r in rs]
            med[w] = (statistics.median(r["goodput_mbit"] for r in rs), statistics.median(ns))
            ratio = ("", "")
            if w == 2 and 1 in med:
                ratio = (f"{med[2][0] / med[1][0]:.3f}", f"{med[2][1] / med[1][1]:.3f}")
            cpu = statistics.median(r.get("weir_cpu", 0) for r in rs)
            where = ", ".join(r.get("placement", "?") for r in rs)
            out.append(f"| {m} | {w} | {med[w][0]:.2f} | {statistics.median(r['jain'] for r in rs):.4f} "
                       f"| {med[w][1]:.0f} ({min(ns):.0f}-{max(ns):.0f}) | {cpu:.0%} | {where} "
                       f"| {ratio[0]} | {ratio[1]} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default="pfq,postack,tcr")
    ap.add_argument("--rate", default="20mbit", help='class rate each way; "none": unshaped')
    ap.add_argument("--flows", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--burst-us", type=int, default=weirtb.config.SHARED_CORES_BURST_US,
                    help="shaping.burst_us for both worker counts (the testbed's default "
                         "for several workers; 1000 is weir's own default)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="docs/results/workers")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("bench_workers: run as root")
    if a.quick:
        a.modes, a.rounds, a.seconds = "pfq", 1, 6
    modes = a.modes.split(",")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    os.environ["WEIR_TESTBED_CFG"] = str(REPO / "conf" / "testbed.cfg")
    tb = weirtb.Testbed(lan=2, wan=2, paths=[PathSpec(delay=5), PathSpec(delay=5)])
    with tb.claim().up():
        for rnd in range(a.rounds):
            for m in modes:
                for w in (1, 2):
                    r = one_run(tb, out, m, a.rate, w, a.flows, a.seconds, a.burst_us)
                    r["round"] = rnd
                    rows.append(r)
                    print(r, flush=True)
    bad = [e for e in tb.weir_exits if e[0] != 0]
    for f in out.glob("*.cfg"):
        f.unlink()
    with open(out / "workers.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    md = table(rows, modes)
    md += (f"\n{a.flows} iperf3 uploads, {a.seconds} s, class {a.rate} each way, burst_us "
           f"{a.burst_us}, {a.rounds} "
           f"round(s) interleaved; weir exits not 0: {len(bad)}.\n"
           f"Command: `scripts/bench_workers.py {' '.join(argv if argv is not None else sys.argv[1:])}`\n")
    (out / "workers.md").write_text(md)
    print(md)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

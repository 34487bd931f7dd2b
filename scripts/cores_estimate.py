#!/usr/bin/python3
"""Cores needed for 10, 25 and 100 GbE at 64 B and IMIX, on paper, from weir-bench's
measured cycles per frame per mode (issue 18).

Either runs weir-bench (--bench PATH, --rounds N: N runs, the median per flows and mode
is used and the spread shown) or reads runs it saved before (--from-json FILE..., each
file the output of `weir-bench ... -- --json`). Writes OUT/cores.md (and, when it ran the
bench, OUT/bench-NN.json).

The arithmetic, and what it assumes (the table's header repeats it):
  frames/s at line rate = rate / ((frame + 20) * 8)   (20 B: preamble, SFD, IFG per frame)
  64 B: 14.88 Mpps at 10 GbE; IMIX (7:4:1 of 64, 576, 1500 B; mean 354.3 B): 3.34 Mpps
  ns per frame = weir's (weir-bench mode, whose frames are 64 B) + I/O (--io-ns: the PMD's
  receive and transmit of the frame, which weir-bench does not do)
  cores = frames/s x ns per frame / 1e9, per direction at full line rate, rounded up;
  both directions full take twice as many.
weir-bench's cost per frame does not depend on the frame's size (weir reads headers; the
payload is never touched), so IMIX differs from 64 B only in frames per second.

Usage:
  scripts/cores_estimate.py --bench build/app/bench/weir-bench --rounds 3 --out docs/results/workers
  scripts/cores_estimate.py --from-json docs/results/workers/bench-*.json --out docs/results/workers
"""
import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

RATES = (("10 GbE", 10e9), ("25 GbE", 25e9), ("100 GbE", 100e9))
# Simple IMIX by frame count: 7 x 64, 4 x 576, 1 x 1500 bytes.
IMIX = (7 * 64 + 4 * 576 + 1 * 1500) / 12
WIRE_EXTRA = 20
MODES = ("parse+flow", "+pfq-cut", "+pfq", "pfq+ack", "postack", "tcr", "ipabr")


def pps(rate, frame):
    return rate / ((frame + WIRE_EXTRA) * 8)


def run_bench(bench, flows, packets, rnd):
    argv = [bench, "--no-huge", "-m", "2048", "--no-pci", "-l", "0", f"--file-prefix=cores{rnd}",
            "--log-level=1", "--", "--flows", flows, "--packets", str(packets), "--json"]
    cp = subprocess.run(argv, capture_output=True, text=True, check=True)
    return cp.stdout[cp.stdout.index("["):]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", help="weir-bench binary to run")
    ap.add_argument("--from-json", nargs="+", default=[], help="saved weir-bench --json outputs")
    ap.add_argument("--flows", default="1000,65536,1048576")
    ap.add_argument("--packets", type=int, default=2000000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--io-ns", type=float, default=31.0,
                    help="receive + transmit cost per frame, ns (default: testpmd io "
                         "forwarding between net_null ports here, ~32 Mpps a core)")
    ap.add_argument("--out", default="docs/results/workers")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    if a.bench:
        for r in range(a.rounds):
            text = run_bench(a.bench, a.flows, a.packets, r)
            (out / f"bench-{r:02d}.json").write_text(text)
            runs.append(json.loads(text))
            print(f"round {r} done", file=sys.stderr, flush=True)
    for f in a.from_json:
        runs.append(json.loads(Path(f).read_text()))
    if not runs:
        sys.exit("cores_estimate: give --bench or --from-json")
    cyc, hz = {}, []
    for run in runs:
        for e in run:
            cyc.setdefault((e["flows"], e["mode"]), []).append(e["cycles_per_pkt"])
            hz.append(e["mpps"] * 1e6 * e["cycles_per_pkt"])
    ghz = statistics.median(hz) / 1e9
    flows = sorted({k[0] for k in cyc})
    lines = [f"# Cores per line rate, on paper (issue 18)\n",
             f"weir-bench: {len(runs)} run(s), median cycles per frame; TSC {ghz:.3f} GHz "
             f"(this VM); I/O {a.io_ns:.0f} ns a frame added; one direction at full line rate "
             f"(both directions full: twice the cores). Frames/s: 64 B "
             + ", ".join(f"{n} {pps(r, 64) / 1e6:.2f} M" for n, r in RATES)
             + f"; IMIX (mean {IMIX:.1f} B) "
             + ", ".join(f"{n} {pps(r, IMIX) / 1e6:.2f} M" for n, r in RATES) + ".\n",
             "| flows | mode | cycles/frame (spread) | ns/frame + I/O | Mpps a core | "
             + " | ".join(f"{n} 64 B" for n, _ in RATES) + " | "
             + " | ".join(f"{n} IMIX" for n, _ in RATES) + " |",
             "|---|---|---|---|---|" + "---|" * (2 * len(RATES))]
    for fl in flows:
        for m in MODES:
            v = cyc.get((fl, m))
            if not v:
                continue
            c = statistics.median(v)
            ns = c / ghz + a.io_ns
            cores = [math.ceil(pps(r, sz) * ns / 1e9) for sz in (64, IMIX) for _, r in RATES]
            lines.append(f"| {fl} | {m} | {c:.0f} ({min(v):.0f}-{max(v):.0f}) | {ns:.0f} | "
                         f"{1e3 / ns:.2f} | " + " | ".join(str(x) for x in cores) + " |")
    lines.append("")
    lines.append("Command: `scripts/cores_estimate.py "
                 + " ".join(argv if argv is not None else sys.argv[1:]) + "`")
    md = "\n".join(lines) + "\n"
    (out / "cores.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

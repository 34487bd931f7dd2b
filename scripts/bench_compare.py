#!/usr/bin/env python3
"""Two weir-bench binaries side by side: cycles per packet per mode and flow count, as a
ratio (this machine is shared and runs at two speeds, so rounds alternate A, B, A, B...
and the table reports medians over rounds and the spread).

  scripts/bench_compare.py --a /tmp/old/build/app/bench/weir-bench \\
                           --b build/app/bench/weir-bench --rounds 5 [--flows 1000,65536,1048576]

Prints a Markdown table: flows, mode, A and B median cycles/packet, B/A (median of the
per-round ratios) and its min-max over rounds. Build both the same way (e.g. both with
-Dnative=true) before comparing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(binary, flows, packets, extra="", huge=False, prefix="bench"):
    # --no-huge backs every per-flow array with 4 KiB pages: at 1M flows each one a
    # packet touches costs a page walk. A production appliance runs on hugepages.
    mem = ["--file-prefix", prefix] if huge else ["--no-huge", "--file-prefix", prefix]
    argv = [binary] + mem + ["-m", "2048", "--no-pci", "-l", "0", "--log-level=error", "--",
            "--flows", flows, "--packets", str(packets), "--json"] + extra.split()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        sys.exit(f"{binary} failed: {out.stderr[-2000:]}")
    text = out.stdout[out.stdout.index("["):]
    return {(r["flows"], r["mode"]): r["cycles_per_pkt"] for r in json.loads(text)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="baseline weir-bench")
    ap.add_argument("--b", required=True, help="candidate weir-bench")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--flows", default="1000,65536,1048576")
    ap.add_argument("--packets", type=int, default=2_000_000)
    ap.add_argument("--a-args", default="", help="extra weir-bench options for A (e.g. --plain-drr)")
    ap.add_argument("--b-args", default="", help="extra weir-bench options for B")
    ap.add_argument("--huge", action="store_true",
                    help="run on hugepages (2 GiB free in /dev/hugepages), not --no-huge")
    args = ap.parse_args()
    rounds = []
    for r in range(args.rounds):
        order = ("a", "b") if r % 2 == 0 else ("b", "a")
        res = {k: run(getattr(args, k), args.flows, args.packets, getattr(args, k + "_args"),
                      args.huge, f"bench-{os.getpid()}-{k}")   # apart from other benches
               for k in order}
        rounds.append(res)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    keys = [k for k in rounds[0]["a"] if k in rounds[0]["b"]]
    pages = "hugepages" if args.huge else "4 KiB pages (--no-huge)"
    print(f"weir-bench cycles per packet, medians of {args.rounds} alternating rounds, {pages}\n")
    print("| flows | mode | A | B | B/A | B/A min-max |")
    print("|---|---|---|---|---|---|")
    for k in keys:
        a = [r["a"][k] for r in rounds]
        b = [r["b"][k] for r in rounds]
        ratios = [y / x for x, y in zip(a, b) if x > 0]
        print(f"| {k[0]} | {k[1]} | {statistics.median(a):.1f} | {statistics.median(b):.1f} | "
              f"{statistics.median(ratios):.3f} | {min(ratios):.2f}-{max(ratios):.2f} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What a running capture costs the worker: weir-bench's shaped modes with no capture, a
capture of a class no frame is in (the filter checked on every frame) and a capture of the
class every frame is in (every frame copied onto the ring with its verdict), in alternating
rounds on one machine; cycles per packet, medians, and the ratio to no capture with its
spread over rounds (docs/results/capture/README.md).

  scripts/bench_capture.py [--bench build/app/bench/weir-bench] [--base OTHER_WEIR_BENCH]
                           [--rounds 5] [--flows 1000,65536] [--packets 1000000]

--base: also run another weir-bench (e.g. one built from main before capture existed)
without --capture: the cost of capture's one branch a frame when none runs.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(binary, flows, packets, extra):
    prefix = f"capbench-{os.getpid()}"
    argv = [binary, "--no-huge", "--file-prefix", prefix, "-m", "2048", "--no-pci", "-l", "0",
            "--log-level=error", "--", "--flows", flows, "--packets", str(packets),
            "--modes", "+pfq,postack", "--json"] + extra
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        sys.exit(f"{argv} failed: {out.stderr[-2000:]}")
    text = out.stdout[out.stdout.index("["):]
    return {(r["flows"], r["mode"]): r["cycles_per_pkt"] for r in json.loads(text)
            if r["mode"] != "baseline"}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=str(REPO / "build" / "app" / "bench" / "weir-bench"))
    ap.add_argument("--base", help="a weir-bench without capture, run without --capture")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--flows", default="1000,65536")
    ap.add_argument("--packets", type=int, default=1_000_000)
    args = ap.parse_args()
    variants = {"none": (args.bench, ["--capture", "none"]),
                "other class": (args.bench, ["--capture", "other"]),
                "its class": (args.bench, ["--capture", "class"])}
    if args.base:
        variants = {"before capture": (args.base, []), **variants}
    names = list(variants)
    rounds = []
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        rounds.append({n: run(variants[n][0], args.flows, args.packets, variants[n][1])
                       for n in order})
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    keys = list(rounds[0]["none"])
    # On a shared machine a run is only ever slowed down by others: the fastest of the
    # rounds is the least disturbed, the median shows how much the rest were.
    for stat, fn in (("fastest", min), ("median", statistics.median)):
        print(f"\nweir-bench cycles per packet, {stat} of {args.rounds} alternating rounds "
              f"({args.packets} packets, 4 KiB pages), and its ratio to 'none'\n")
        print("| flows | mode | " + " | ".join(names) + " | " +
              " | ".join(f"{n} / none" for n in names if n != "none") + " |")
        print("|---|---|" + "---|" * (2 * len(names) - 1))
        for k in keys:
            v = {n: fn([r[n][k] for r in rounds]) for n in names}
            cells = [f"{v[n]:.1f}" for n in names]
            cells += [f"{v[n] / v['none']:.3f}" for n in names if n != "none"]
            print(f"| {k[0]} | {k[1]} | " + " | ".join(cells) + " |")
    print("\nper-round ratios to 'none' (min-max):")
    for k in keys:
        spread = ", ".join(
            f"{n} {min(r[n][k] / r['none'][k] for r in rounds):.2f}-"
            f"{max(r[n][k] / r['none'][k] for r in rounds):.2f}" for n in names if n != "none")
        print(f"  {k[0]} {k[1]}: {spread}")


if __name__ == "__main__":
    main()

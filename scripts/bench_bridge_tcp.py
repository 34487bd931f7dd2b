#!/usr/bin/python3
"""One iperf3 TCP flow LAN->WAN through weir and through a Linux bridge in
weir's place, on the same testbed with a zero-delay emulator.

The two gateways take turns (weir, bridge, weir, bridge, ...) so that drift
in what else the 2-core machine is doing hits both alike; the medians and
their ratio are what to quote. Run as root:

    scripts/bench_bridge_tcp.py [--rounds 3] [--time 10] [--emu wanemu|bridge]
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import weirtb  # noqa: E402
from weirtb import PathSpec  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--time", type=int, default=10, help="seconds per run")
    ap.add_argument("--emu", choices=("wanemu", "bridge"), default=None,
                    help="default: weir-wanemu (delay 0) if built, else a Linux bridge")
    ap.add_argument("--cc", default=None, help="congestion control of the sender")
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    a = ap.parse_args()

    emu = a.emu or ("wanemu" if os.access(weirtb.wanemu_binary(), os.X_OK) else "bridge")
    modes = ["weir", "linux-bridge"]
    if not os.access(weirtb.weir_binary(), os.X_OK):
        print(f"weir not built ({weirtb.weir_binary()}): measuring the Linux bridge only")
        modes = ["linux-bridge"]

    results = {m: [] for m in modes}
    with weirtb.Testbed(lan=1, wan=1, gateway=modes[0], emu=emu,
                        paths=[PathSpec(delay=0, rate="0")]) as tb:
        print(f"emulator: {emu} (no delay), {a.time} s per run, {a.rounds} rounds")
        for rnd in range(a.rounds):
            for mode in modes:
                if tb.gateway_running != mode:
                    tb.start_gateway(mode)
                flow = tb.iperf(n=1, duration=a.time, cc=a.cc)[0]
                if flow.error:
                    sys.exit(f"{mode}: iperf3 failed: {flow.error}")
                results[mode].append(flow.goodput_bps / 1e9)
                print(f"round {rnd + 1} {mode:>12}: {flow.goodput_bps / 1e9:6.3f} Gbit/s  "
                      f"retr {flow.retransmits}", flush=True)
        if tb.gateway_running == "weir":
            rc = tb.stop_gateway()
            print(f"weir exit code {rc}")

    med = {m: statistics.median(v) for m, v in results.items()}
    for m in modes:
        print(f"{m:>12}: median {med[m]:.3f} Gbit/s  (runs: "
              + ", ".join(f"{x:.3f}" for x in results[m]) + ")")
    if len(modes) == 2 and med["linux-bridge"] > 0:
        print(f"ratio weir / linux-bridge: {med['weir'] / med['linux-bridge']:.2f}")
    if a.json:
        print(json.dumps({"emu": emu, "time": a.time, "gbit_s": results, "median": med}))


if __name__ == "__main__":
    main()

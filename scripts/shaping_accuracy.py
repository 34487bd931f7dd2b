#!/usr/bin/env python3
"""Shaping accuracy in the testbed: measured / configured link rate.

For each rate, weir (mode pfq, one default class) shapes the outbound link and
four TCP flows (iperf3, 10 ms paths) try to fill it; the rate is read from weir's
own class counter (wire bytes, Ethernet overhead included, as the rate is
configured) over the last seconds of the run. Where the testbed's veth and
af_packet cannot carry the offered rate, the "offered" column says what the
senders managed with no shaping at all.

    scripts/shaping_accuracy.py [--rates 1,10,100,1000] [--seconds 8]
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import PathSpec  # noqa: E402


def config(path, rate_mbit):
    path.write_text(weirtb.testbed_config_text(
        f'shaping = {{ mode = "pfq"; outbound = "{rate_mbit}mbit"; }};\n', stats_interval=0.2))
    return path


def measure(tb, seconds):
    """Wire bit/s through the default class from 3 s in to 1 s before the end."""
    import threading
    samples, stop = [], threading.Event()

    def poll():
        while not stop.is_set():
            st = tb.weir_stats()
            samples.append((st["uptime_s"], st["shaping"]["outbound"]["classes"]["default"]["bytes"]))
            time.sleep(0.1)
    t = threading.Thread(target=poll, daemon=True)
    t.start()
    while not samples:
        time.sleep(0.05)
    t0 = samples[-1][0]
    flows = tb.iperf(n=4, duration=seconds)
    stop.set()
    t.join()
    # After slow start, and a second short of the senders' end.
    a = min(samples, key=lambda s: abs(s[0] - (t0 + 3)))
    b = min(samples, key=lambda s: abs(s[0] - (t0 + seconds - 1)))
    return (b[1] - a[1]) * 8 / (b[0] - a[0]), sum(f.goodput_bps for f in flows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="1,10,100,1000")
    ap.add_argument("--seconds", type=int, default=8)
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="weir-acc-"))
    tb = weirtb.Testbed(lan=2, wan=2, gateway="linux-bridge", emu="wanemu",
                        paths=[PathSpec(delay=5), PathSpec(delay=5)])
    why = tb.check_prerequisites()
    if why:
        sys.exit("testbed unavailable: " + "; ".join(why))
    rows = []
    try:
        tb.claim().up()
        offered = sum(f.goodput_bps for f in tb.iperf(n=4, duration=args.seconds))
        for r in [int(x) for x in args.rates.split(",")]:
            os.environ["WEIR_TESTBED_CFG"] = str(config(d / f"acc{r}.cfg", r))
            tb.start_gateway("weir")
            wire, goodput = measure(tb, args.seconds)
            rows.append((r, wire, goodput))
            print(f"{r:>6} Mbit/s: wire {wire / 1e6:9.3f} Mbit/s  ratio {wire / (r * 1e6):.4f}  "
                  f"goodput {goodput / 1e6:8.2f}", flush=True)
    finally:
        tb.down()
    print(f"\nunshaped (linux bridge) offered goodput: {offered / 1e6:.1f} Mbit/s")
    print("| configured | measured (wire) | ratio | TCP goodput |")
    print("|---|---|---|---|")
    for r, wire, goodput in rows:
        print(f"| {r} Mbit/s | {wire / 1e6:.3f} Mbit/s | {wire / (r * 1e6):.4f} | {goodput / 1e6:.2f} Mbit/s |")


if __name__ == "__main__":
    main()

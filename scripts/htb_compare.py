#!/usr/bin/env python3
"""weir beside Linux HTB (pfifo leaves) on the two-class test of issue #3.

A 30 Mbit/s link with gold (20 Mbit/s, prio 0) and bulk (10 Mbit/s, prio 1), both
borrowing up to the link; four TCP flows fill each class (WAN ports 5201-5204 in
gold, 5301-5304 in bulk) over equal 10 ms paths, outbound, for 16 s. The same
policy runs as weir (conf/testbed-twoclass.cfg, in each shaping mode asked for)
and as an HTB tree in the gateway namespace (scripts/weirtb/htb.py). Reported per
gateway: each class's goodput over seconds 4-14, Jain's index among its flows, the
senders' mean smoothed RTT (the paths' own is 10 ms: the rest is queueing at the
gateway), the mean RTT of a ping in bulk (another flow's packets behind the
saturated class) and retransmissions.

    scripts/htb_compare.py [--modes postack,pfq] [--seconds 16] [--json FILE]
"""
import argparse
import json
import os
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.traffic import jain, steady_bps  # noqa: E402

GOLD_PORT, BULK_PORT = 5201, 5301
HTB_SPEC = {
    "outbound": {"rate": "30mbit", "default": "bulk", "classes": [
        {"name": "gold", "rate": "20mbit", "ceil": "30mbit", "prio": 0, "wan_ports": [5201, 5204]},
        {"name": "bulk", "rate": "10mbit", "ceil": "30mbit", "prio": 1, "wan_ports": [5301, 5304]}]},
    "limit": 1000,
}


def weir_config(d, mode):
    body = weirtb.conf_body("testbed-twoclass.cfg")
    body = body.replace("shaping = {", f'shaping = {{\n  mode = "{mode}";', 1)
    p = d / f"twoclass-{mode}.cfg"
    p.write_text(weirtb.testbed_config_text(body + "\n"))
    return p


def run_two_classes(tb, seconds):
    res = {}

    def go(key, port):
        res[key] = tb.iperf(n=4, duration=seconds, base_port=port)
    def probe():
        # ICMP falls in the default class (bulk) in both gateways: the delay
        # a packet of another flow sees behind the saturated class.
        import time
        time.sleep(4)
        res["ping"] = tb.ping(tb.lan_hosts[0], tb.wan_hosts[0], count=40, interval=0.25,
                              timeout=seconds + 10)
    th = [threading.Thread(target=go, args=a) for a in (("gold", GOLD_PORT), ("bulk", BULK_PORT))]
    th.append(threading.Thread(target=probe))
    for t in th:
        t.start()
    for t in th:
        t.join()
    ping = res.pop("ping")
    out = {}
    for key, flows in res.items():
        errs = [f.error for f in flows if f.error]
        if errs:
            raise RuntimeError(f"{key}: {errs}")
        steady = [steady_bps(f.interval_bps, 4, 14) for f in flows]
        rtts = [f.mean_rtt_ms for f in flows if f.mean_rtt_ms is not None]
        out[key] = {"mbit": sum(steady) / 1e6, "jain": jain(steady),
                    "flows": [round(x / 1e6, 2) for x in steady],
                    "rtt_ms": sum(rtts) / len(rtts) if rtts else None,
                    "retransmits": sum(f.retransmits or 0 for f in flows)}
    out["probe_ms"] = ping.rtt_avg_ms if ping.received else None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default="postack,pfq")
    ap.add_argument("--seconds", type=int, default=16)
    ap.add_argument("--json")
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="weir-htb-"))
    tb = weirtb.Testbed(lan=2, wan=2, gateway="linux-bridge", emu="wanemu",
                        paths=[PathSpec(delay=5), PathSpec(delay=5)])
    why = tb.check_prerequisites()
    if why:
        sys.exit("testbed unavailable: " + "; ".join(why))
    rows = {}
    try:
        tb.claim().up()
        for gw in ["linux-htb"] + [f"weir-{m}" for m in args.modes.split(",")]:
            if gw == "linux-htb":
                tb.start_gateway("linux-htb", htb_spec=HTB_SPEC)
            else:
                os.environ["WEIR_TESTBED_CFG"] = str(weir_config(d, gw.split("-", 1)[1]))
                tb.start_gateway("weir")
            rows[gw] = run_two_classes(tb, args.seconds)
            r = rows[gw]
            print(f"{gw:>12}: gold {r['gold']['mbit']:.2f} (Jain {r['gold']['jain']:.4f}, RTT "
                  f"{r['gold']['rtt_ms']} ms, retx {r['gold']['retransmits']}), bulk "
                  f"{r['bulk']['mbit']:.2f} (Jain {r['bulk']['jain']:.4f}, RTT "
                  f"{r['bulk']['rtt_ms']} ms, retx {r['bulk']['retransmits']}), probe "
                  f"{r['probe_ms']} ms", flush=True)
    finally:
        tb.down()
    print("\n| gateway | gold Mbit/s | Jain gold | bulk Mbit/s | Jain bulk | sender RTT gold / bulk (ms) | ping in bulk (ms) | retransmissions |")
    print("|---|---|---|---|---|---|---|---|")
    for gw, r in rows.items():
        g, b = r["gold"], r["bulk"]
        fmt = lambda x: f"{x:.1f}" if x is not None else "-"  # noqa: E731
        print(f"| {gw} | {g['mbit']:.2f} | {g['jain']:.4f} | {b['mbit']:.2f} | {b['jain']:.4f} | "
              f"{fmt(g['rtt_ms'])} / {fmt(b['rtt_ms'])} | {fmt(r['probe_ms'])} | "
              f"{g['retransmits'] + b['retransmits']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

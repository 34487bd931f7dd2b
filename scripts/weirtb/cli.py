"""scripts/testbed: bring the virtual testbed up and down, look at it, demo it."""

import argparse
import json
import os
import sys

from . import topology, traffic
from .topology import Testbed, TestbedError, weir_config


def cmd_up(a):
    tb = Testbed(lan=a.lan, wan=a.wan, gateway=a.gateway, emu=a.emu)
    tb.up()
    print(f"testbed up: {a.lan} LAN hosts (wtb-l1..), {a.wan} WAN hosts (wtb-w1..), "
          f"gateway={a.gateway}, emulator={a.emu}; state in {topology.STATE_DIR}")
    if a.gateway == "weir":
        print(f"weir stats: {tb.weir_stats_path}")
    return 0


def cmd_down(a):
    topology.down()
    print("testbed down")
    return 0


def cmd_status(a):
    st = topology.status()
    if not st["namespaces"]:
        print("testbed is down")
        return 1
    s = st["state"]
    print(f"namespaces: {' '.join(sorted(st['namespaces']))}")
    if s:
        print(f"gateway={s.get('gateway')} emulator={s.get('emu')} lan={s.get('lan')} wan={s.get('wan')}")
    for role, p in st["procs"].items():
        print(f"{role}: pid {p['pid']} {'running' if p['alive'] else 'DEAD'}")
    stats = topology.STATE_DIR / "weir-stats.json"
    if stats.exists():
        print("weir stats:", stats.read_text().strip()[:2000])
    return 0


def cmd_exec(a):
    argv = a.cmd
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        argv = [os.environ.get("SHELL", "/bin/sh")]
    from .netns import in_ns
    os.execvp("ip", in_ns(a.host, argv))


# The counters worth a glance in the demo; the stats file has more.
DEMO_COUNTERS = ("rx", "tx", "forwarded", "managed", "non_ip", "malformed", "dropped", "tx_full")


def weir_counter_lines(stats):
    lines = []
    for port, c in sorted((stats.get("ports") or {}).items()):
        shown = [k for k in DEMO_COUNTERS if k in c] or [k for k, v in c.items() if isinstance(v, int)]
        lines.append(f"  port {port}: " + " ".join(f"{k}={c[k]}" for k in shown))
    for direction, sh in sorted((stats.get("shaping") or {}).items()):
        if sh:
            lines.append(f"  shaping {direction}: rate={sh['rate_bps'] / 1e6:g}Mbit/s "
                         + " ".join(f"{k}={v}" for k, v in sh.items() if k != "rate_bps"))
    if "flows" in stats:
        lines.append("  flows: " + " ".join(f"{k}={v}" for k, v in stats["flows"].items()))
    return lines


def cmd_demo(a):
    with Testbed(lan=a.lan, wan=a.wan, gateway=a.gateway, emu=a.emu) as tb:
        paths = ("WAN paths one-way delay " + ", ".join(f"{p.delay} ms" for p in tb.paths)
                 if a.emu == "wanemu" else "no WAN delay")
        print(f"testbed up: gateway={a.gateway}, emulator={a.emu}, {paths}")
        if a.gateway == "weir":
            print(f"weir config: {weir_config()}")
        print(f"running {a.flows} TCP flows LAN->WAN for {a.time} s ...")
        res = tb.iperf(n=a.flows, duration=a.time, cc=a.cc)
        print(traffic.format_flows(res))
        if tb.gateway_running == "weir":
            print("weir counters (stats file):")
            print("\n".join(weir_counter_lines(tb.weir_stats())))
            rc = tb.stop_gateway()
            print(f"weir exited with {rc} on SIGTERM")
    print("testbed down")
    return 0 if all(r.error is None and r.bytes_received > 0 for r in res) else 1


def main(argv=None):
    ap = argparse.ArgumentParser(prog="testbed", description="weir's virtual testbed (docs/testbed.md)")
    sub = ap.add_subparsers(dest="command", required=True)

    def shape(p, gateway="weir"):
        p.add_argument("--gateway", choices=topology.GATEWAYS, default=gateway)
        p.add_argument("--emu", choices=topology.EMULATORS, default="wanemu",
                       help="wanemu = weir-wanemu with the paper's 5/25/75 ms paths; "
                            "bridge = a plain Linux bridge, no delay")
        p.add_argument("--lan", type=int, default=2, help="LAN hosts")
        p.add_argument("--wan", type=int, default=3, help="WAN hosts (one path each)")

    shape(sub.add_parser("up", help="build the testbed (tears down leftovers first)"))
    sub.add_parser("down", help="remove every wtb-* namespace and the processes in them")
    sub.add_parser("status", help="what runs now")
    d = sub.add_parser("demo", help="up, 4 TCP flows over the 3 paths, table, counters, down")
    shape(d)
    d.add_argument("--flows", type=int, default=4)
    d.add_argument("--time", type=int, default=10)
    d.add_argument("--cc", choices=("reno", "cubic", "bbr"), default=None)
    e = sub.add_parser("exec", help="run CMD in HOST's namespace (l1, w2, gw, emu, lan)")
    e.add_argument("host")
    e.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    try:
        return {"up": cmd_up, "down": cmd_down, "status": cmd_status, "exec": cmd_exec,
                "demo": cmd_demo}[a.command](a)
    except TestbedError as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 2

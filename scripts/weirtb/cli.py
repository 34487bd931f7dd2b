"""scripts/testbed: bring the virtual testbed up and down, look at it, demo it."""

import argparse
import json
import os
import sys

from . import netns, topology, traffic
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


def weirctl():
    """scripts/weirctl as a module: its tables, the same as the command prints."""
    from importlib.machinery import SourceFileLoader
    import types
    path = str(topology.REPO / "scripts" / "weirctl")
    mod = types.ModuleType("weirctl")
    mod.__file__ = path
    SourceFileLoader("weirctl", path).exec_module(mod)
    return mod


def classes_table(stats):
    """The stats file's classes as `weirctl classes` prints them (the stats file has
    their counters and rates; a class's parent is not in it)."""
    tree = {}
    for direction, sh in (stats.get("shaping") or {}).items():
        if sh:
            tree[direction] = {"classes": [{"name": n, **c} for n, c in (sh.get("classes") or {}).items()]}
    return weirctl().class_rows(tree) if tree else ""


def api_table(tb):
    """`weirctl classes` run against weir's API in its namespace; None without one."""
    cp = tb.run("gw", [sys.executable, str(topology.REPO / "scripts" / "weirctl"), "classes"],
                check=False, timeout=20)
    return cp.stdout.rstrip("\n") if cp.returncode == 0 and cp.stdout.strip() else None


def weir_counter_lines(stats, table=None):
    lines = []
    for port, c in sorted((stats.get("ports") or {}).items()):
        shown = [k for k in DEMO_COUNTERS if k in c] or [k for k, v in c.items() if isinstance(v, int)]
        lines.append(f"  port {port}: " + " ".join(f"{k}={c[k]}" for k in shown))
    if "flows" in stats:
        lines.append("  flows: " + " ".join(f"{k}={v}" for k, v in stats["flows"].items()))
    table = table or classes_table(stats)
    if table:
        lines += ["", "classes (as `weirctl classes` shows them):"] + ["  " + l for l in table.splitlines()]
    return lines


def try_while_running(port=8080):
    return f"""
Try it while weir runs (the testbed stays up until `scripts/testbed down`):
  scripts/testbed up                                 # weir in the testbed, left running
  scripts/testbed exec w1 iperf3 -s -D               # a server on a WAN host ...
  scripts/testbed exec l1 iperf3 -c {Testbed.addr('w1')} -t 120 &  # ... and traffic through weir
  scripts/testbed dashboard                          # then open http://127.0.0.1:{port}/dashboard/
  scripts/testbed exec gw scripts/weirctl status
  scripts/testbed exec gw scripts/weirctl classes
  scripts/testbed exec gw scripts/weirctl top --interval 1
  scripts/testbed exec gw scripts/weirctl flows --proto tcp
  scripts/testbed exec gw scripts/weirctl class set outbound default --rate 20mbit
  scripts/testbed down
The dashboard (docs/dashboard.md) is weir's own page: http://127.0.0.1:{port}/dashboard/ where
weir's API listens; `scripts/testbed dashboard` forwards port {port} of this host into
weir's namespace."""


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
            print("\n".join(weir_counter_lines(tb.weir_stats(), api_table(tb))))
            rc = tb.stop_gateway()
            print(f"weir exited with {rc} on SIGTERM")
    print("testbed down")
    if a.gateway == "weir":
        print(try_while_running())
    return 0 if all(r.error is None and r.bytes_received > 0 for r in res) else 1


def cmd_dashboard(a):
    from . import forward
    print(f"forwarding {a.listen}:{a.port} to weir's API in {netns.ns_name('gw')} "
          f"(127.0.0.1:{a.to}): open http://{a.listen}:{a.port}/dashboard/  (Ctrl-C ends it)",
          flush=True)
    try:
        forward.serve("gw", a.listen, a.port, a.to)
    except KeyboardInterrupt:
        pass
    return 0


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
    f = sub.add_parser("dashboard", help="forward a port of this host to weir's API and dashboard")
    f.add_argument("--port", type=int, default=8080, help="port on this host (default 8080)")
    f.add_argument("--listen", default="127.0.0.1")
    f.add_argument("--to", type=int, default=8080, help="weir's management.port (default 8080)")
    e = sub.add_parser("exec", help="run CMD in HOST's namespace (l1, w2, gw, emu, lan)")
    e.add_argument("host")
    e.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    try:
        return {"up": cmd_up, "down": cmd_down, "status": cmd_status, "exec": cmd_exec,
                "demo": cmd_demo, "dashboard": cmd_dashboard}[a.command](a)
    except TestbedError as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 2

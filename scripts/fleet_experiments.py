#!/usr/bin/python3
"""Failover of an HA pair of weir boxes between FRR routers (OSPF + BFD) in namespaces.

    fleet_experiments.py failover [--kills 10] [--no-hook] [--out DIR]
    fleet_experiments.py plans [--seconds 24] [--out DIR]

failover: kill weir A (SIGKILL) under two 1000/s UDP streams (LAN->WAN and back) and 8
TCP connections sending a record every 20 ms, --kills times: the time from the kill to the
first datagram through the standby B (each direction), datagrams lost, TCP connections
that carried data after the failover; then A is restarted and the routes move back,
with the datagrams lost meanwhile. The unit's ExecStopPost hook (dist/weir-failopen,
fail-closed: links down) runs right after the kill, as systemd would; --no-hook leaves
the detection to BFD alone.
plans: each subscriber (l1: 20 Mbit/s, l2: 10 Mbit/s) downloads with iperf3 across a kill
of A; the rate on B against the rate on A and against the plan.

Writes DIR/failover.csv (one row per kill), DIR/plans.csv and prints a table. As root,
with Debian's frr installed; namespaces use WEIRTB_NS_PREFIX (docs/fleet.md).
"""
import argparse
import csv
import json
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from weirtb import fleet as fl  # noqa: E402
from weirtb.experiment import write_csv  # noqa: E402
from weirtb.failprobe import failover_ms  # noqa: E402

PY = "/usr/bin/python3"
PROBE = str(Path(fl.__file__).with_name("failprobe.py"))
PPS = 1000


def start_streams(f, seconds, conns=8, port=7000):
    """UDP both ways and TCP connections l1 -> srv; returns the processes."""
    p = {"rx_up": f.popen("srv", [PY, PROBE, "udp-recv", "--port", str(port + 1),
                                   "--seconds", str(seconds + 3)]),
         "rx_down": f.popen("l1", [PY, PROBE, "udp-recv", "--port", str(port + 2),
                                    "--seconds", str(seconds + 3)])}
    if conns:
        p["tcp_srv"] = f.popen("srv", [PY, PROBE, "tcp-serve", "--port", str(port + 3),
                                        "--seconds", str(seconds + 3)])
    for k in list(p):
        line = p[k].stdout.readline().strip()
        if line != "READY":
            raise RuntimeError(f"{k}: {line} {p[k].stderr.read()}")
    p["tx_up"] = f.popen("l1", [PY, PROBE, "udp-send", "--host", fl.HOSTS["srv"], "--port",
                                str(port + 1), "--pps", str(PPS), "--seconds", str(seconds)])
    p["tx_down"] = f.popen("srv", [PY, PROBE, "udp-send", "--host", fl.HOSTS["l1"], "--port",
                                   str(port + 2), "--pps", str(PPS), "--seconds", str(seconds)])
    if conns:
        p["tcp_cli"] = f.popen("l1", [PY, PROBE, "tcp-hold", "--host", fl.HOSTS["srv"],
                                      "--port", str(port + 3), "--conns", str(conns),
                                      "--seconds", str(seconds)])
    return p


def collect(p):
    out = {}
    for k, proc in p.items():
        o, e = proc.communicate(timeout=60)
        try:
            out[k] = json.loads(o.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise RuntimeError(f"{k}: no result: {o[-300:]} {e[-300:]}")
    return out


def forwarded(f, box):
    s = f.stats(box)["ports"]
    return s["lan"]["forwarded"] + s["wan"]["forwarded"]


def one_kill(f, kill_at=2.0, after=4.0, hook=True, conns=8):
    """Kill A under traffic; the figures of this failover."""
    a0, b0 = forwarded(f, "a"), forwarded(f, "b")
    active_before = f.active_box()
    p = start_streams(f, kill_at + after, conns)
    time.sleep(kill_at)
    a_fwd = forwarded(f, "a") - a0
    t_kill = f.kill_weir("a", signal.SIGKILL)
    if hook:
        f.hook("a", "open")             # ExecStopPost: fail-closed, both links down
    t_hook = time.monotonic()
    r = collect(p)
    kill_ns = int(t_kill * 1e9)
    up_ms, up_lost = failover_ms(r["rx_up"], kill_ns, PPS)
    down_ms, down_lost = failover_ms(r["rx_down"], kill_ns, PPS)
    res = {"up_ms": up_ms, "down_ms": down_ms, "up_lost": up_lost, "down_lost": down_lost,
           "failover_ms": None if up_ms is None or down_ms is None else max(up_ms, down_ms),
           "hook_ms": round((t_hook - t_kill) * 1000, 1),
           "a_forwarded": a_fwd, "b_forwarded": forwarded(f, "b") - b0,
           "active_before": active_before, "active_after": f.active_box()}
    (f.state / f"kill-{time.time():.0f}.json").write_text(json.dumps({"kill_ns": kill_ns, **r}))
    if conns:
        # Survived: the server kept receiving on it for the last second of the run, after
        # the failover, and it ended with the client's FIN or not at all, no reset.
        t_end = kill_ns + after * 1e9
        end_ok = [c for c in r["tcp_srv"].values()
                  if c["last_ns"] and c["last_ns"] > t_end - 1e9 and c["end"] in (None, "fin")]
        res["tcp_conns"] = conns
        res["tcp_survived"] = len(end_ok)
        res["tcp_client_errors"] = len(r["tcp_cli"]["errors"])
        res["tcp_soft_errors"] = sum(r["tcp_cli"]["soft_errors"].values())
    return res


def restore(f, seconds=14.0):
    """Restart A under the UDP streams; routes move back to it. Datagrams lost."""
    p = start_streams(f, seconds, conns=0, port=7100)
    time.sleep(0.5)
    t0 = time.monotonic()
    f.hook("a", "close")                # ExecStartPost once READY; links up for the start
    f.start_weir("a")
    f.wait_converged(timeout=seconds - 1, box="a")
    back_s = time.monotonic() - t0
    r = collect(p)
    lost = sum(r[tx]["sent"] - len(set(r[rx]["seq"]))
               for rx, tx in (("rx_up", "tx_up"), ("rx_down", "tx_down")))
    return {"back_s": round(back_s, 2), "restore_lost": lost}


def failover(a):
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with fl.Fleet() as f:
        for k in range(a.kills):
            res = one_kill(f, hook=not a.no_hook)
            res.update(restore(f))
            res["kill"] = k + 1
            rows.append(res)
            print(json.dumps(res), flush=True)
    keys = ["kill", "failover_ms", "up_ms", "down_ms", "up_lost", "down_lost", "hook_ms",
            "tcp_conns", "tcp_survived", "tcp_client_errors", "tcp_soft_errors", "a_forwarded",
            "b_forwarded", "active_before", "active_after",
            "back_s", "restore_lost"]
    name = "failover-nohook.csv" if a.no_hook else "failover.csv"
    write_csv(out / name, rows, keys)
    fo = [r["failover_ms"] for r in rows if r["failover_ms"] is not None]
    print(f"\nfailover over {len(rows)} kills ({'BFD only' if a.no_hook else 'with the hook'}): "
          f"median {statistics.median(fo):.0f} ms, range {min(fo):.0f}-{max(fo):.0f} ms; "
          f"TCP connections surviving {sum(r['tcp_survived'] for r in rows)} of "
          f"{sum(r['tcp_conns'] for r in rows)}; datagrams lost while A came back: "
          f"{[r['restore_lost'] for r in rows]}")


def iperf_intervals(j):
    return [iv["sum"]["bits_per_second"] for iv in j["intervals"]]


def class_sample(f, box):
    """(weir's uptime, {subscriber: inbound class bytes}) from box's stats file."""
    s = f.stats(box)
    cl = s["shaping"]["inbound"]["classes"]
    return s["uptime_s"], {h: cl[h]["bytes"] for h in fl.PLANS}


def class_rates(s0, s1):
    dt = s1[0] - s0[0]
    return {h: (s1[1][h] - s0[1][h]) * 8 / dt for h in fl.PLANS}


def plans(a):
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    T, kill_at = a.seconds, a.seconds // 3
    with fl.Fleet() as f:
        srv = [f.popen("srv", ["iperf3", "-s", "-1", "-p", str(5201 + i)]) for i in range(2)]
        time.sleep(0.5)
        cli = [f.popen(h, ["iperf3", "-c", fl.HOSTS["srv"], "-p", str(5201 + i), "-R", "-t",
                           str(T), "-i", "1", "-J"]) for i, h in enumerate(fl.PLANS)]
        # Each box's own account of each subscriber's class, on the wire (bytes of the
        # frames it sent, by its uptime): A from 2 s to the kill, B from 3 s after it.
        time.sleep(2.2)
        a0 = class_sample(f, "a")
        time.sleep(kill_at - 2.2)
        a1 = class_sample(f, "a")
        f.kill_weir("a", signal.SIGKILL)
        f.hook("a", "open")
        time.sleep(3)
        b0 = class_sample(f, "b")
        time.sleep(T - kill_at - 5)
        b1 = class_sample(f, "b")
        wire_a, wire_b = class_rates(a0, a1), class_rates(b0, b1)
        res = [json.loads(c.communicate(timeout=T + 30)[0]) for c in cli]
        for s in srv:
            s.kill()
            s.communicate()
        active = f.active_box()
    rows = []
    for (h, plan), j in zip(fl.PLANS.items(), res):
        iv = iperf_intervals(j)
        on_a = statistics.mean(iv[2:kill_at])
        on_b = statistics.mean(iv[kill_at + 3:])
        rows.append({"subscriber": h, "plan_bps": plan, "on_a_bps": round(on_a),
                     "on_b_bps": round(on_b), "b_over_a": round(on_b / on_a, 4),
                     "a_over_plan": round(on_a / plan, 4), "b_over_plan": round(on_b / plan, 4),
                     "class_a_bps": round(wire_a[h]), "class_b_bps": round(wire_b[h]),
                     "class_a_over_plan": round(wire_a[h] / plan, 4),
                     "class_b_over_plan": round(wire_b[h] / plan, 4),
                     "intervals": " ".join(f"{x / 1e6:.2f}" for x in iv)})
    write_csv(out / "plans.csv", rows)
    for r in rows:
        print(f"{r['subscriber']}: plan {r['plan_bps'] / 1e6:g} Mbit/s, goodput on A "
              f"{r['on_a_bps'] / 1e6:.2f}, on B {r['on_b_bps'] / 1e6:.2f} (B/A {r['b_over_a']:.4f});"
              f" class on the wire A {r['class_a_over_plan']:.4f}, B {r['class_b_over_plan']:.4f} "
              f"of the plan")
    print(f"routes through box {active} at the end")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    fo = sub.add_parser("failover")
    fo.add_argument("--kills", type=int, default=10)
    fo.add_argument("--no-hook", action="store_true")
    fo.add_argument("--out", default="docs/results/fleet")
    pl = sub.add_parser("plans")
    pl.add_argument("--seconds", type=int, default=24)
    pl.add_argument("--out", default="docs/results/fleet")
    a = ap.parse_args(argv)
    return {"failover": failover, "plans": plans}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""DiffServ edge markers with real TCP (seed 004, Figs. 4.4-4.8 and 4.14-4.18), scaled.

The thesis' topology on the testbed: three aggregates of TCP flows, each from its own
LAN host to its own WAN host, with contracts of 8, 2 and 5 Mbit/s and one-way delays
of 70, 20 and 5 ms (the middles of the thesis' 50-90, 15-25 and 0-10 ms ranges). weir
is the edge: one outbound class per aggregate whose marker colours the aggregate's
packets (the class only marks: its rate is far above the traffic). weir-wanemu's
--core is the DiffServ core: one link shared by all three at 15 Mbit/s (exact), 18
(20 % over) or 12 (20 % under), its queue managed by RIO (In = AF11, the green code
point; every other DSCP is Out). Thresholds are the thesis' 150/300 (In) and 50/250
(Out) packets of 500 B converted to 1514-byte frames: 50/99 and 17/83, max_p 0.1 and
0.15. Senders use Reno with SACK (the thesis' TCP SACK).

Markers compared, each in a run of its own:
  tb    the classical token bucket, depth 50 x 500 B = 25000 B
  tbq   token bucket with a queue: the thesis' 64/16/40 x 500 B queues as 1514 B
        frames (21/5/13), depth (50 - queue) x 500 B, at least two frames
  tbq48 TBQ with the queue Eq. 4.8 gives (n = 1) for each path's RTT, depth 2 frames
  arm   ARM (PI on the total rate), depth 25000 B, alpha 0.2
  carm  CARM (PI on the green rate), depth 25000 B, alpha 0.2 (carm@0.45: another alpha)
With --pareto, a fourth host pair (one-way 40 ms, RTT 80 ms as the thesis' 70-90)
sends short unmarked TCP transfers, Pareto sizes (shape 1.5, mean 500 kB) at
exponential gaps (mean 1 s): background traffic that only gets what is left.

Reported per aggregate: the goodput at its receiver and the green (in-profile) rate
and total rate weir's marker counted at the edge, averaged from --warm to the end.

    scripts/marker_experiments.py [--quick] [--seconds 60] [--warm 20]
        [--cases exact,over,under] [--markers tb,tbq,arm,carm] [--pareto]
        [--flow-scale 0.5] [--rio MININ:MAXIN:PIN:MINOUT:MAXOUT:POUT]
        [--contracts 8,6,5] [--core-mbit 15] [--stop a2:30] [--cc reno|cubic|bbr]
        [--out docs/results/markers] [--append] [--replot]

`marker_experiments.py all [--dry-run]` reruns every result of docs/results/markers (the
sweep included) from the tree's commit, which each table names. --spread S: each
aggregate's flows start over 0..S s in 5 groups (the thesis: 0-50 s).
--quick: the exact case, tb and tbq, 3 flows per aggregate, 12 s runs: a check that the
pipeline works (CI), not a result. Needs root (testbed). Writes runs.csv (per second),
summary.csv, table.md and markers.png into --out.
"""
import argparse
import csv
import json
import math
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.experiment import repo_commit, write_csv  # noqa: E402

# (name, lan host, wan host, flows in the thesis, contract Mbit/s, one-way delay ms,
#  TBQ queue in the thesis, packets of 500 B)
AGGS = [("a1", "l1", "w1", 20, 8, 70, 64),
        ("a2", "l2", "w2", 30, 2, 20, 16),
        ("a3", "l3", "w3", 25, 5, 5, 40)]
CASES = {"exact": 1.0, "over": 1.2, "under": 0.8}
FRAME = 1514
WIRE = FRAME + 24               # what the core's rate counts per full frame
RIO = "50:99:0.1:17:83:0.15"    # thesis 150/300, 50/250 x 500 B in 1514 B frames
BASE_PORT = 5201


def marker_conf(kind, agg):
    name, _, _, _, mbit, delay, q500 = agg
    cir = f'"{mbit}mbit"'
    if kind == "tb":
        return f'{{ type = "tb"; cir = {cir}; cbs = 25000; }}'
    if kind == "tbq":
        q = max(2, round(q500 * 500 / FRAME))
        cbs = max(2 * FRAME, (50 - q500) * 500)
        return f'{{ type = "tbq"; cir = {cir}; cbs = {cbs}; queue = {q}; }}'
    if kind == "tbq48":
        # TBQ with its queue from Eq. 4.8 (n = 1) for the path's RTT, depth two frames.
        return f'{{ type = "tbq"; cir = {cir}; cbs = {2 * FRAME}; rtt_ms = {2 * delay}; }}'
    if kind.split("@")[0] in ("arm", "carm"):
        # "carm@0.45": another gain (the thesis' Fig. 4.13 uses 0.45, 0.2, 0.05)
        base, _, alpha = kind.partition("@")
        return f'{{ type = "{base}"; cir = {cir}; cbs = 25000; alpha = {alpha or "0.2"}; }}'
    raise ValueError(kind)


def weir_config(d, kind, conf=None, tag="markers"):
    """weir's config for marker `kind`: one class per aggregate of AGGS, marked by
    conf(kind, agg) (default marker_conf), none for an aggregate without a contract."""
    conf = conf or marker_conf
    classes = ",\n".join(
        f'      {{ name = "{a[0]}"; rate = "300mbit"' +
        (f'; marker = {conf(kind, a)}; }}' if a[4] else "; }")
        for a in AGGS)
    rules = ",\n".join(f'  {{ class = "{a[0]}"; lan = "{weirtb.Testbed.addr(a[1])}"; }}'
                       for a in AGGS)
    body = f"""
shaping = {{
  mode = "pfq";
  outbound = {{
    rate = "1gbit";
    default = "be";
    classes = (
{classes},
      {{ name = "be"; rate = "300mbit"; }}
    );
  }};
  inbound = "1gbit";
}};

rules = (
{rules}
);
"""
    p = d / f"{tag}-{kind}.cfg"
    p.write_text(weirtb.testbed_config_text(body))
    return p


SINK = r"""
import socket, threading, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(256)
def eat(c):
    while c.recv(65536): pass
    c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=eat, args=(c,), daemon=True).start()
"""

SOURCE = r"""
import socket, threading, sys, random, time
dst, port, secs, seed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
buf = b"x" * 65536
def send(n):
    try:
        c = socket.create_connection((dst, port)); 
        while n > 0:
            k = c.send(buf[:min(n, len(buf))]); n -= k
        c.close()
    except OSError:
        pass
end = time.time() + secs
while time.time() < end:
    # Pareto, shape 1.5, mean 500 kB: scale = mean (a - 1) / a
    n = int(500000 / 3 * rng.paretovariate(1.5))
    threading.Thread(target=send, args=(n,), daemon=True).start()
    time.sleep(rng.expovariate(1.0))
"""


def sample_stats(tb, stop, samples):
    """weir's per-class marker counters, once a second, until stop is set."""
    while not stop.is_set():
        try:
            st = tb.weir_stats()
            cls = st["shaping"]["outbound"]["classes"]
            # weir's own clock for rates: the file is written about once a second, and a
            # reader starved on a loaded machine would otherwise stretch or shrink intervals.
            row = {"t": time.monotonic(), "up": float(st["uptime_s"])}
            if samples and samples[-1]["up"] == row["up"]:
                stop.wait(0.2)
                continue
            for a in AGGS + [("be",)]:
                c = cls[a[0]]
                m = c.get("marker")
                row[a[0]] = {"bytes": c["bytes"],
                             "green": m["bytes"]["green"] if m else 0,
                             "total": sum(m["bytes"].values()) if m else c["bytes"],
                             "token_rate": m["token_rate_bps"] if m else 0}
            samples.append(row)
        except (OSError, KeyError, ValueError, weirtb.TestbedError):
            pass
        stop.wait(1.0)


def rate_between(samples, name, key, t0, t1):
    """Mean bit/s of counter `key` of class `name` between monotonic t0 and t1."""
    pts = [s for s in samples if t0 <= s["t"] <= t1]
    if len(pts) < 2:
        return float("nan")
    return (pts[-1][name][key] - pts[0][name][key]) * 8 / (pts[-1]["up"] - pts[0]["up"])


def spread_iperf(tb, a, n, secs, spread, port, rng, groups=5):
    """The thesis starts each aggregate's flows uniformly over [0, 50] s. Here the n flows
    go in up to `groups` iperf3 instances (-P k each) that start at whole seconds drawn
    uniformly from [0, spread] and all end at `secs`; the result's per-second goodput is
    the groups' sum on the run's clock (a group's missing seconds count 0)."""
    sizes = [n // groups + (g < n % groups) for g in range(min(groups, n))]
    offs = sorted(rng.randint(0, int(spread)) for _ in sizes)
    out = [None] * len(sizes)

    def grp(g):
        time.sleep(offs[g])
        out[g] = tb.iperf(n=1, duration=secs - offs[g], pairs=[(a[1], a[2])],
                          base_port=port + g, extra_args=("-P", str(sizes[g])))[0]
    th = [threading.Thread(target=grp, args=(g,)) for g in range(len(sizes))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    total = [0.0] * secs
    for g, f in enumerate(out):
        for j, v in enumerate(f.interval_bps):
            if offs[g] + j < secs:
                total[offs[g] + j] += v
    err = "; ".join(f.error for f in out if f.error) or None
    return weirtb.traffic.FlowResult(flow=0, lan=a[1], wan=a[2], direction="out", cc=None,
                                     interval_bps=total,
                                     retransmits=sum(f.retransmits or 0 for f in out),
                                     error=err)


def run_one(tb, d, case, kind, args):
    os.environ["WEIR_TESTBED_CFG"] = str(weir_config(d, kind))
    tb.start_gateway("weir")
    samples, stop = [], threading.Event()
    sampler = threading.Thread(target=sample_stats, args=(tb, stop, samples))
    res, procs = {}, []
    emu0 = tb.wanemu_stats()
    if args.pareto:
        procs.append(tb.popen("w4", [sys.executable, "-c", SINK, "6000"]))
        time.sleep(0.5)
        procs.append(tb.popen("l4", [sys.executable, "-c", SOURCE, tb.addr("w4"), "6000",
                                     str(args.seconds), "7"]))

    def go(i, a):
        n = max(1, round(a[3] * args.flow_scale))
        secs = args.stop.get(a[0], args.seconds)
        spread = getattr(args, "spread", 0)
        if spread <= 0:
            res[a[0]] = tb.iperf(n=1, duration=secs, pairs=[(a[1], a[2])],
                                 base_port=BASE_PORT + 10 * i, extra_args=("-P", str(n)))[0]
            return
        res[a[0]] = spread_iperf(tb, a, n, secs, spread, BASE_PORT + 10 * i,
                                 random.Random(f"{a[0]}-{getattr(args, 'run', 0)}"))
    th = [threading.Thread(target=go, args=(i, a)) for i, a in enumerate(AGGS)]
    t_start = time.monotonic()
    sampler.start()
    for t in th:
        t.start()
    for t in th:
        t.join()
    stop.set()
    sampler.join()
    for p in procs:
        p.kill()
        p.communicate()
    emu1 = tb.wanemu_stats()
    rc = tb.stop_gateway()
    if rc != 0:
        raise RuntimeError(f"weir exited {rc}")
    rio0 = emu0.get("core", {}).get("to_path", {}).get("rio", {})
    rio1 = emu1.get("core", {}).get("to_path", {}).get("rio", {})
    drops = {k: rio1.get(k, 0) - rio0.get(k, 0) for k in ("dropped_in", "dropped_out",
                                                           "rx_in", "rx_out")}
    t0, t1 = t_start + args.warm, t_start + args.seconds
    rows = []
    for a in AGGS:
        f = res[a[0]]
        if f.error:
            raise RuntimeError(f"{a[0]}: {f.error}")
        ivs = f.interval_bps[args.warm:args.stop.get(a[0], args.seconds)]
        rows.append({
            "case": case, "marker": kind, "agg": a[0], "contract_mbit": a[4],
            "flows": max(1, round(a[3] * args.flow_scale)), "rtt_ms": 2 * a[5],
            "goodput_mbit": sum(ivs) / len(ivs) / 1e6 if ivs else float("nan"),
            "green_mbit": rate_between(samples, a[0], "green", t0, t1) / 1e6,
            "edge_mbit": rate_between(samples, a[0], "total", t0, t1) / 1e6,
            "token_mbit": (sum(s[a[0]]["token_rate"] for s in samples if t0 <= s["t"] <= t1) /
                           max(1, sum(1 for s in samples if t0 <= s["t"] <= t1)) / 1e6),
            "retransmits": f.retransmits or 0,
        })
    bg = rate_between(samples, "be", "bytes", t0, t1) / 1e6
    series = []
    for i, s in enumerate(samples[1:], 1):
        p = samples[i - 1]
        dt = s["up"] - p["up"]
        for a in AGGS:
            series.append({"case": case, "marker": kind, "agg": a[0],
                           "t": round(s["t"] - t_start, 2),
                           "green_mbit": (s[a[0]]["green"] - p[a[0]]["green"]) * 8 / dt / 1e6,
                           "edge_mbit": (s[a[0]]["total"] - p[a[0]]["total"]) * 8 / dt / 1e6})
    return rows, series, {"case": case, "marker": kind, "background_mbit": bg, **drops}


# What the thesis reports for each figure (its numbers are only in plots; these are its
# words about them, Sec. 4.3.3 and 4.4.3).
THESIS = {
    ("exact", "tb"): "8 Mbit/s aggregate fails its contract",
    ("exact", "tbq"): "8 Mbit/s aggregate very close to its contract",
    ("over", "tb"): "8 Mbit/s aggregate fails its contract",
    ("over", "tbq"): "8 Mbit/s aggregate exceeds its contract",
    ("under", "tb"): "TB and TBQ perform similarly",
    ("under", "tbq"): "TB and TBQ perform similarly",
    ("exact", "arm"): "totals converge slowly to the contracts; green below contract",
    ("exact", "carm"): "green at the contract rates (8 Mbit/s oscillates more)",
    ("over", "arm"): "excess taken by one aggregate; green below contract",
    ("over", "carm"): "all share the excess; green at precisely the contract",
    ("under", "arm"): "similar to CARM",
    ("under", "carm"): "similar to ARM",
}


def write_outputs(out, rows, series, extra, args):
    out.mkdir(parents=True, exist_ok=True)
    if args.append and (out / "summary.csv").exists():
        # Runs of an earlier invocation (other markers) first; numbers back from text.
        def num(d):
            return {k: (float(v) if k.endswith(("_mbit", "_ms")) else
                        int(v) if k in ("flows", "retransmits", "contract_mbit") else v)
                    for k, v in d.items()}
        rows = [num(r) for r in csv.DictReader(open(out / "summary.csv"))] + rows
        series = list(csv.DictReader(open(out / "runs.csv"))) + series
        if args.replot:
            head = (out / "table.md").read_text().splitlines()[0]
            args.seconds = int(head.split("Runs of ")[1].split(" s")[0])
            args.warm = int(head.split("means from ")[1].split(" s")[0])
            args.flow_scale = float(head.split("aggregate x")[1].split(" ")[0])
            args.pareto = "with Pareto" in head
            args.rio = head.split("core RIO ")[1].rstrip(".") if "core RIO " in head else RIO
        extra = json.loads((out / "core.json").read_text()) + extra
    write_csv(out / "summary.csv", rows)
    write_csv(out / "runs.csv", series)
    (out / "core.json").write_text(json.dumps(extra, indent=1))
    lines = [f"Runs of {args.seconds} s, means from {args.warm} s; flows per aggregate "
             f"x{args.flow_scale} of the thesis' 20/30/25; {getattr(args, 'cc', 'reno').capitalize()}+SACK; "
             f"{'with' if args.pareto else 'without'} Pareto background; core RIO {args.rio}.",
             "",
             "| case | marker | aggregate (contract) | goodput Mbit/s | green at edge | total at edge "
             "| goodput / contract | green / contract | token rate (arm/carm) | thesis says |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        token = f"{r['token_mbit']:.2f}" if "arm" in r["marker"] else ""
        said = THESIS.get((r["case"], r["marker"]), "") if r["agg"] == "a1" else ""
        lines.append(f"| {r['case']} | {r['marker']} | {r['agg']} ({r['contract_mbit']:g}) | "
                     f"{r['goodput_mbit']:.2f} | {r['green_mbit']:.2f} | {r['edge_mbit']:.2f} | "
                     f"{r['goodput_mbit'] / r['contract_mbit']:.2f} | "
                     f"{r['green_mbit'] / r['contract_mbit']:.2f} | {token} | {said} |")
    lines += ["", "| case | marker | background Mbit/s | core RIO drops In / Out | frames In / Out |",
              "|---|---|---|---|---|"]
    for e in extra:
        lines.append(f"| {e['case']} | {e['marker']} | {e['background_mbit']:.2f} | "
                     f"{e['dropped_in']} / {e['dropped_out']} | {e['rx_in']} / {e['rx_out']} |")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no PNG (apt-get install python3-matplotlib)")
        return
    cases = [c for c in CASES if any(r["case"] == c for r in rows)]
    kinds = list(dict.fromkeys(r["marker"] for r in rows))
    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 4), squeeze=False)
    for ax, case in zip(axes[0], cases):
        width = 0.8 / len(kinds)
        for k, kind in enumerate(kinds):
            rs = [r for r in rows if r["case"] == case and r["marker"] == kind]
            xs = [i + k * width for i in range(len(rs))]
            ax.bar(xs, [r["goodput_mbit"] for r in rs], width, label=f"{kind} goodput")
            ax.scatter(xs, [r["green_mbit"] for r in rs], marker="_", s=200, color="k", zorder=3)
        for i, a in enumerate(AGGS):
            ax.hlines(a[4], i - 0.1, i + 0.9, colors="r", linestyles="dashed")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(AGGS))])
        ax.set_xticklabels([f"{a[0]} ({a[4]} Mbit/s, {2 * a[5]} ms)" for a in AGGS], fontsize=8)
        ax.set_title(f"{case} ({CASES[case]:.0%} of the contracts)")
        ax.set_ylabel("Mbit/s")
        ax.legend(fontsize=7)
    fig.suptitle("bars: goodput at the receiver; black ticks: green (in-profile) rate at the "
                 "edge; red dashes: the contract", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "markers.png", dpi=110)
    print(f"wrote {out / 'markers.png'}")
    # The thesis plots rates over time (Figs. 4.4-4.8, 4.13-4.18): green and total rate at
    # the edge, second by second, one panel per case and aggregate.
    fig, axes = plt.subplots(len(cases), len(AGGS), figsize=(5 * len(AGGS), 3 * len(cases)),
                             squeeze=False)
    for ci, case in enumerate(cases):
        for ai, a in enumerate(AGGS):
            ax = axes[ci][ai]
            for kind in kinds:
                pts = [r for r in series if r["case"] == case and r["marker"] == kind and
                       r["agg"] == a[0]]
                ts = [float(r["t"]) for r in pts]
                line, = ax.plot(ts, [float(r["green_mbit"]) for r in pts], label=f"{kind} green")
                ax.plot(ts, [float(r["edge_mbit"]) for r in pts], color=line.get_color(),
                        linestyle=":", linewidth=0.8)
            ax.axhline(a[4], color="r", linestyle="dashed", linewidth=0.8)
            ax.set_title(f"{case}: {a[0]} ({a[4]} Mbit/s, RTT {2 * a[5]} ms)", fontsize=9)
            ax.set_xlabel("s")
            ax.set_ylabel("Mbit/s at the edge")
            if ci == 0 and ai == 0:
                ax.legend(fontsize=7)
    fig.suptitle("solid: green (in-profile) rate; dotted: total rate; red: the contract",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "series.png", dpi=100)
    print(f"wrote {out / 'series.png'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--cases", default="exact,over,under")
    ap.add_argument("--markers", default="tb,tbq,arm,carm")
    ap.add_argument("--flow-scale", type=float, default=0.5)
    ap.add_argument("--pareto", action="store_true")
    ap.add_argument("--contracts", help="the three contracts in Mbit/s, e.g. 8,6,5 (Fig. 4.19)")
    ap.add_argument("--core-mbit", type=float,
                    help="the core's rate for the exact case (default: the contracts' sum)")
    ap.add_argument("--stop", default="",
                    help="aggregates that stop early, e.g. a2:30 (Fig. 4.19's second aggregate)")
    ap.add_argument("--rio", default=RIO, help=f"the core's RIO curves (default {RIO})")
    ap.add_argument("--cc", default="reno",
                    help="the senders' congestion control (the thesis: Reno with SACK)")
    ap.add_argument("--append", action="store_true",
                    help="add to the runs already in --out (same settings, other markers)")
    ap.add_argument("--out", default=str(REPO / "docs" / "results" / "markers"))
    ap.add_argument("--replot", action="store_true",
                    help="no runs: redraw the table and figure from the CSVs in --out")
    ap.add_argument("--spread", type=float, default=0,
                    help="each aggregate's flows start over 0..SPREAD s in 5 groups "
                         "(the thesis: 0-50 s); 0: all at once")
    ap.add_argument("--run", type=int, default=0,
                    help="the repetition's number: it seeds the spread starts")
    if sys.argv[1:2] == ["all"]:
        return run_all(sys.argv[2:])
    args = ap.parse_args()
    args.stop = {k: int(v) for k, v in (x.split(":") for x in args.stop.split(",") if x)}
    if args.contracts:
        c = [float(x) for x in args.contracts.split(",")]
        AGGS[:] = [a[:4] + (int(m) if m.is_integer() else m,) + a[5:] for a, m in zip(AGGS, c)]
    if args.replot:
        args.append = True
        write_outputs(Path(args.out), [], [], [], args)
        return
    if args.quick:
        args.seconds, args.warm, args.cases, args.markers = 12, 4, "exact", "tb,tbq"
        args.flow_scale = 3 / 20
    cases = args.cases.split(",")
    kinds = args.markers.split(",")
    d = Path(tempfile.mkdtemp(prefix="weir-markers-"))
    n = 4 if args.pareto else 3
    paths = [PathSpec(delay=a[5]) for a in AGGS] + ([PathSpec(delay=40)] if args.pareto else [])
    rows, series, extra = [], [], []
    for case in cases:
        core_bps = (args.core_mbit or sum(a[4] for a in AGGS)) * 1e6 * WIRE / FRAME * CASES[case]
        tb = weirtb.Testbed(lan=n, wan=n, gateway="linux-bridge", emu="wanemu", paths=paths,
                            core=f"rate={int(core_bps)},limit=120,rio={args.rio}")
        why = tb.check_prerequisites()
        if why:
            sys.exit("testbed unavailable: " + "; ".join(why))
        try:
            tb.claim().up()
            tb.stop_gateway()
            for h in tb.lan_hosts:
                tb.set_cc(h, args.cc)
            for kind in kinds:
                r, s, e = run_one(tb, d, case, kind, args)
                rows += r
                series += s
                extra.append(e)
                print(f"{case} {kind}: " + ", ".join(
                    f"{x['agg']} {x['goodput_mbit']:.2f} (green {x['green_mbit']:.2f})" for x in r),
                    flush=True)
        finally:
            tb.down()
    write_outputs(Path(args.out), rows, series, extra, args)
    with open(Path(args.out) / "table.md", "a") as f:
        f.write(f"\nweir at {repo_commit()}; flows' starts spread over 0-{args.spread:g} s.\n")


# Every result of docs/results/markers, by one command: `marker_experiments.py all [--dry-run]`.
# (out under docs/results/markers, the script, its arguments)
ALL = [
    ("sweep", "marker_sweep.py", ["--contracts", "4,12", "--markers", "tb,tbq,carm,arm",
                                  "--seconds", "45", "--warm", "20", "--spread", "15",
                                  "--runs", "5"]),
    (".", "marker_experiments.py", ["--spread", "15"]),
    *[(f"repeat-exact/run{i}", "marker_experiments.py",
       ["--cases", "exact", "--markers", "tb,tbq", "--spread", "15", "--run", str(i)])
      for i in range(3)],
    (".", "marker_experiments.py", ["--markers", "tbq48", "--append", "--spread", "15"]),
    ("pareto", "marker_experiments.py", ["--pareto", "--cases", "exact,over", "--spread", "15"]),
    ("alpha", "marker_experiments.py", ["--cases", "exact", "--markers",
                                        "carm@0.45,carm,carm@0.05", "--spread", "15"]),
    ("rio-short-out", "marker_experiments.py", ["--cases", "exact", "--rio",
                                                "50:99:0.1:5:30:0.5", "--spread", "15"]),
    ("varying-a3-5", "marker_experiments.py", ["--cases", "exact", "--markers", "carm,tb",
                                               "--contracts", "8,6,5", "--core-mbit", "15",
                                               "--stop", "a2:30"]),
    ("varying-a3-7", "marker_experiments.py", ["--cases", "exact", "--markers", "carm,tb",
                                               "--contracts", "8,6,7", "--core-mbit", "15",
                                               "--stop", "a2:30"]),
    ("cc-cubic", "marker_experiments.py", ["--cases", "exact", "--seconds", "50", "--warm", "15",
                                           "--cc", "cubic", "--spread", "15"]),
    ("cc-bbr", "marker_experiments.py", ["--cases", "exact", "--seconds", "50", "--warm", "15",
                                         "--cc", "bbr", "--spread", "15"]),
]


def run_all(argv):
    """Rebuild every CSV, PNG and table of docs/results/markers (about 2.5 hours as root),
    each from the tree's commit (written into the tables). --dry-run: the commands only."""
    import subprocess
    base = REPO / "docs" / "results" / "markers"
    for sub, script, extra in ALL:
        cmd = [sys.executable, str(REPO / "scripts" / script), *extra,
               "--out", str((base / sub).resolve())]
        print("+", " ".join(cmd), flush=True)
        if "--dry-run" not in argv:
            subprocess.run(cmd, check=True)
    bench = REPO / "build" / "app" / "bench" / "weir-bench-marker"
    cmd = [str(bench), "--no-huge", "-m", "512", "--no-pci", "-l", "1", "--",
           "--packets", "1000000", "--rounds", "7"]
    print("+", " ".join(cmd), ">", base / "bench.txt", flush=True)
    if "--dry-run" not in argv:
        (base / "bench.txt").write_text(subprocess.run(cmd, check=True, capture_output=True,
                                                       text=True).stdout)


if __name__ == "__main__":
    main()

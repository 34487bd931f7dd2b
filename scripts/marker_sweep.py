#!/usr/bin/env python3
"""The thesis' contract-rate sweeps (seed 004, Figs. 4.3 and 4.12) with real TCP, scaled.

Experiment 1 of Secs. 4.3.3 and 4.4.3: two TCP aggregates of 30 flows each, one-way delays
in 15-25 ms; one aggregate has a contract rate A and a marker at weir's edge, the other has
none (background traffic, all Out). The core's capacity is A plus a fixed excess (20 Mbit/s
in the thesis), so the core's drop probability changes little as A varies. For each A the
figure shows what the contracted aggregate achieves: the thesis' point is that a classical
token bucket (tb) falls short of A the more the larger A is, TBQ (Fig. 4.3) and CARM
(Fig. 4.12) stay close to it.

Scaled to this 2-vCPU testbed: --flow-scale (0.5: 15 flows each), --excess-mbit (10, half
the thesis' 20), A from --contracts (2,4,6,8 Mbit/s), 20 ms one-way for both, Reno+SACK,
the core's RIO as scripts/marker_experiments.py. Markers: tb (depth 50 x 500 B), tbq (the
thesis' Fig. 4.3 setting: depth 20 x 500 B and a 30 x 500 B queue, as 1514 B frames), arm
and carm (depth 50 x 500 B, alpha 0.2).

    scripts/marker_sweep.py [--quick] [--contracts 2,4,6,8] [--markers tb,tbq,arm,carm]
        [--seconds 40] [--warm 15] [--excess-mbit 10] [--flow-scale 0.5] [--cc reno]
        [--out docs/results/markers/sweep] [--append] [--runs 5] [--spread 15]

--runs: runs per (A, marker) cell, interleaved; the table gives median (min-max), the PNG
the runs and their range. --spread: each aggregate's flows start over 0..SPREAD s in 5
iperf3 groups (the thesis starts them uniformly over 0-50 s); 0 starts them together.

Writes sweep.csv, sweep.md (with the thesis' words beside) and sweep.png into --out.
--quick: A = 2 only, tb and tbq, 3 flows each, 12 s (CI: the pipeline works, not a result).
Needs root (the testbed).
"""
import argparse
import csv
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import marker_experiments as mx  # noqa: E402
import weirtb  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.experiment import repo_commit, write_csv  # noqa: E402

DELAY_MS = 20           # the middle of the thesis' 15-25 ms
FLOWS = 30
THESIS = {
    "tb": "falls short of A, further as A grows (Figs. 4.3, 4.12)",
    "tbq": "close to A over the range (Fig. 4.3)",
    "arm": "the thesis sweeps CARM against the token bucket only",
    "carm": "close to A over the range (Fig. 4.12)",
}


def aggregates(a_mbit):
    # (name, lan host, wan host, thesis flows, contract, one-way ms, TBQ queue in 500 B)
    return [("a1", "l1", "w1", FLOWS, a_mbit, DELAY_MS, 30),
            ("bg", "l2", "w2", FLOWS, 0, DELAY_MS, 0)]


def marker_conf(kind, agg):
    """The sweep's own settings where the thesis gives them (Fig. 4.2's text for TBQ)."""
    name, _, _, _, mbit, _, q500 = agg
    if kind == "tbq":
        q = max(2, round(q500 * 500 / mx.FRAME))
        return f'{{ type = "tbq"; cir = "{mbit}mbit"; cbs = {max(2 * mx.FRAME, 20 * 500)}; queue = {q}; }}'
    return mx.marker_conf(kind, agg)


_base_config = mx.weir_config   # main() points mx.weir_config at the function below


def weir_config(d, kind):
    """marker_experiments' config with this sweep's marker settings."""
    return _base_config(d, kind, conf=marker_conf, tag="sweep")


def cells(rows):
    """(A, marker) -> the runs' rows, in run order."""
    out = {}
    for r in rows:
        out.setdefault((r["contract_mbit"], r["marker"]), []).append(r)
    return out


def stat(vals):
    """median, min, max"""
    v = sorted(vals)
    n = len(v)
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return med, v[0], v[-1]


def fmt(vals):
    m, lo, hi = stat(vals)
    return f"{m:.2f} ({lo:.2f}-{hi:.2f})" if len(vals) > 1 else f"{m:.2f}"


def write(out, rows, args, quiet=False):
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "sweep.csv", rows)
    n_runs = max(len(v) for v in cells(rows).values())
    lines = [f"Runs of {args.seconds} s, means from {args.warm} s; two aggregates of "
             f"{max(1, round(FLOWS * args.flow_scale))} {args.cc.capitalize()}+SACK flows, "
             f"{2 * DELAY_MS} ms RTT, starts spread over 0-{args.spread:g} s; "
             f"core = A + {args.excess_mbit:g} Mbit/s, RIO {mx.RIO}; "
             f"median (min-max) of {n_runs} runs per cell; weir at {args.commit}.", "",
             "| A Mbit/s | marker | runs | goodput / A | green at edge / A | "
             "background Mbit/s | core In drops | thesis says |",
             "|---|---|---|---|---|---|---|---|"]
    for (a, kind), rs in sorted(cells(rows).items()):
        lines.append(f"| {a:g} | {kind} | {len(rs)} | "
                     f"{fmt([r['goodput_mbit'] / a for r in rs])} | "
                     f"{fmt([r['green_mbit'] / a for r in rs])} | "
                     f"{fmt([r['background_mbit'] for r in rs])} | "
                     f"{fmt([r['dropped_in'] for r in rs]).replace('.00', '')} | "
                     f"{THESIS.get(kind, '')} |")
    (out / "sweep.md").write_text("\n".join(lines) + "\n")
    if quiet:
        return
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no PNG")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    kinds = list(dict.fromkeys(r["marker"] for r in rows))
    for j, kind in enumerate(kinds):
        cs = sorted((a, rs) for (a, k), rs in cells(rows).items() if k == kind)
        xs = [a + 0.12 * (j - (len(kinds) - 1) / 2) for a, _ in cs]
        st = [stat([r["goodput_mbit"] for r in rs]) for _, rs in cs]
        ax.errorbar(xs, [m for m, _, _ in st], yerr=[[m - lo for m, lo, _ in st],
                                                     [hi - m for m, _, hi in st]],
                    marker="o", capsize=3, label=f"{kind} (median, min-max)")
        for x, (_, rs) in zip(xs, cs):
            ax.scatter([x] * len(rs), [r["goodput_mbit"] for r in rs], s=6, color="grey",
                       zorder=3)
    top = max(r["contract_mbit"] for r in rows)
    ax.plot([0, top], [0, top], "k:", linewidth=0.8, label="A")
    ax.set_xlabel("contract rate A, Mbit/s")
    ax.set_ylabel("contracted aggregate's goodput, Mbit/s")
    ax.set_title("Figs. 4.3 / 4.12, scaled: achieved rate against A")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "sweep.png", dpi=110)
    print(f"wrote {out / 'sweep.png'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--contracts", default="2,4,6,8")
    ap.add_argument("--markers", default="tb,tbq,arm,carm")
    ap.add_argument("--seconds", type=int, default=40)
    ap.add_argument("--warm", type=int, default=15)
    ap.add_argument("--excess-mbit", type=float, default=10)
    ap.add_argument("--flow-scale", type=float, default=0.5)
    ap.add_argument("--cc", default="reno", help="senders' congestion control (thesis: Reno+SACK)")
    ap.add_argument("--runs", type=int, default=5, help="runs per (A, marker) cell")
    ap.add_argument("--spread", type=float, default=15,
                    help="flows start over 0..SPREAD s, in 5 groups (thesis: 0-50 s); 0: at once")
    ap.add_argument("--out", default=str(REPO / "docs" / "results" / "markers" / "sweep"))
    ap.add_argument("--append", action="store_true",
                    help="keep the rows of --out's sweep.csv for contracts not run now")
    args = ap.parse_args()
    if args.quick:
        args.contracts, args.markers, args.seconds, args.warm = "2", "tb,tbq", 12, 4
        args.flow_scale = 3 / FLOWS
        args.runs, args.spread = 1, 2
    args.commit = repo_commit()
    # marker_experiments' run machinery reads these.
    args.pareto, args.stop = False, {}
    mx.weir_config = weir_config
    d = Path(tempfile.mkdtemp(prefix="weir-sweep-"))
    rows = []
    for a_txt in args.contracts.split(","):
        a = float(a_txt)
        a = int(a) if a.is_integer() else a
        mx.AGGS[:] = aggregates(a)
        core_bps = (a + args.excess_mbit) * 1e6 * mx.WIRE / mx.FRAME
        tb = weirtb.Testbed(lan=2, wan=2, gateway="linux-bridge", emu="wanemu",
                            paths=[PathSpec(delay=DELAY_MS)] * 2,
                            core=f"rate={int(core_bps)},limit=120,rio={mx.RIO}")
        why = tb.check_prerequisites()
        if why:
            sys.exit("testbed unavailable: " + "; ".join(why))
        try:
            tb.claim().up()
            tb.stop_gateway()
            for h in tb.lan_hosts:
                tb.set_cc(h, args.cc)
            for run, kind in [(n, k) for n in range(args.runs)
                              for k in args.markers.split(",")]:
                args.run = run
                try:
                    r, _, e = mx.run_one(tb, d, "exact", kind, args)
                except Exception as ex:  # one failed run must not lose the others
                    print(f"A={a} {kind} run {run}: FAILED {ex}", flush=True)
                    tb.stop_gateway()
                    continue
                a1 = next(x for x in r if x["agg"] == "a1")
                bg = next(x for x in r if x["agg"] == "bg")
                rows.append({"contract_mbit": a, "marker": kind, "run": run,
                             "goodput_mbit": a1["goodput_mbit"], "green_mbit": a1["green_mbit"],
                             "edge_mbit": a1["edge_mbit"], "background_mbit": bg["goodput_mbit"],
                             "dropped_in": e["dropped_in"], "dropped_out": e["dropped_out"],
                             "retransmits": a1["retransmits"]})
                write(Path(args.out), rows, args, quiet=True)   # a cut-short sweep keeps its runs
                print(f"A={a} {kind} run {run}: {a1['goodput_mbit']:.2f} (green {a1['green_mbit']:.2f}), "
                      f"background {bg['goodput_mbit']:.2f}", flush=True)
        finally:
            tb.down()
    if args.append and (Path(args.out) / "sweep.csv").exists():
        ran = {r["contract_mbit"] for r in rows}
        old = [{k: (v if k == "marker" else int(v) if k == "run" else float(v))
                for k, v in r.items()}
               for r in csv.DictReader(open(Path(args.out) / "sweep.csv"))]
        rows = sorted([r for r in old if r["contract_mbit"] not in ran] + rows,
                      key=lambda r: r["contract_mbit"])
    write(Path(args.out), rows, args)


if __name__ == "__main__":
    main()

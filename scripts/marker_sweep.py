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
        [--out docs/results/markers/sweep] [--append]

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


def write(out, rows, args):
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "sweep.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    lines = [f"Runs of {args.seconds} s, means from {args.warm} s; two aggregates of "
             f"{max(1, round(FLOWS * args.flow_scale))} {args.cc.capitalize()}+SACK flows, "
             f"{2 * DELAY_MS} ms RTT; "
             f"core = A + {args.excess_mbit:g} Mbit/s, RIO {mx.RIO}.", "",
             "| A Mbit/s | marker | contracted goodput | / A | green at edge / A | "
             "background goodput | core drops In / Out | thesis says |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['contract_mbit']:g} | {r['marker']} | {r['goodput_mbit']:.2f} | "
                     f"{r['goodput_mbit'] / r['contract_mbit']:.2f} | "
                     f"{r['green_mbit'] / r['contract_mbit']:.2f} | {r['background_mbit']:.2f} | "
                     f"{r['dropped_in']} / {r['dropped_out']} | {THESIS.get(r['marker'], '')} |")
    (out / "sweep.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no PNG")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for kind in dict.fromkeys(r["marker"] for r in rows):
        pts = sorted((r["contract_mbit"], r["goodput_mbit"]) for r in rows if r["marker"] == kind)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=kind)
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
    ap.add_argument("--out", default=str(REPO / "docs" / "results" / "markers" / "sweep"))
    ap.add_argument("--append", action="store_true",
                    help="keep the rows of --out's sweep.csv for contracts not run now")
    args = ap.parse_args()
    if args.quick:
        args.contracts, args.markers, args.seconds, args.warm = "2", "tb,tbq", 12, 4
        args.flow_scale = 3 / FLOWS
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
            for kind in args.markers.split(","):
                r, _, e = mx.run_one(tb, d, "exact", kind, args)
                a1 = next(x for x in r if x["agg"] == "a1")
                bg = next(x for x in r if x["agg"] == "bg")
                rows.append({"contract_mbit": a, "marker": kind,
                             "goodput_mbit": a1["goodput_mbit"], "green_mbit": a1["green_mbit"],
                             "edge_mbit": a1["edge_mbit"], "background_mbit": bg["goodput_mbit"],
                             "dropped_in": e["dropped_in"], "dropped_out": e["dropped_out"],
                             "retransmits": a1["retransmits"]})
                print(f"A={a} {kind}: {a1['goodput_mbit']:.2f} (green {a1['green_mbit']:.2f}), "
                      f"background {bg['goodput_mbit']:.2f}", flush=True)
        finally:
            tb.down()
    if args.append and (Path(args.out) / "sweep.csv").exists():
        ran = {r["contract_mbit"] for r in rows}
        old = [{k: (v if k == "marker" else float(v)) for k, v in r.items()}
               for r in csv.DictReader(open(Path(args.out) / "sweep.csv"))]
        rows = sorted([r for r in old if r["contract_mbit"] not in ran] + rows,
                      key=lambda r: r["contract_mbit"])
    write(Path(args.out), rows, args)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""The premature-ACK paper's Sec. IV (seed 003) with real Linux TCP in the testbed.

    scripts/pep_experiments.py [--quick] [--out DIR] [--secs N] [--reps N]
                               [--modes pep,none,...] [--cc paper,cubic,bbr] [--scenarios NAME,...]

One long flow from l1 (A) to w1 (B) through weir (C, the proxy at the ingress edge) and
weir-wanemu (the bottleneck C-D plus the access D-B): the path's one-way delay is d + 10 ms,
its rate from A to B is constant 1 Mbit/s or `1 + 0.5 sin(k t)` Mbit/s (wanemu sched=, k =
0.2 and 33), its queue 50 frames. weir's link is the 10 Mbit/s access link with one class
guaranteed 1 Mbit/s (the bottleneck's mean: what the paper's PEP is told is available; the
class may borrow the whole link, so weir's shaper holds no mode back). With --follow, weir is
told the sine's rate as it moves (the class's rate PATCHed each time the emulator's changes,
read from its stats each second); without, nothing tells weir and the watermark stays at the
mean. Goodput is measured at the receiver (iperf3's server side, each second).

Modes, side by side: pep, postack, tcr, pfq (weir in that mode), none (weir without
shaping) and, with --modes, pep-bw: pep whose watermark follows the delivery rate weir
measures from R's ACKs (shaping.pep.watermark = "measured"), told nothing. Senders: "paper" = reno with its congestion window clamped at 20 segments and an
initial window of 1 (ip route ... cwnd lock 20 initcwnd 1: the paper's NewReno, window 20,
IW 1), then "cubic" and "bbr" with Linux defaults.

Each cell runs --reps times (5; 3 with --quick), the modes alternating within a round; the
table gives the median and the range. Writes DIR/pep.csv (one row per run), DIR/pep.png
(goodput per second, every run), DIR/pep.md (the table); --quick (CI, ~80 s) runs one short
scenario with pep and none only, into a temporary DIR unless --out.
The A-C access link is emulated too (--access-ms, 10 ms one way at 10 Mbit/s, as the paper's:
a p-ACK reaches the sender in 20 ms); --access-ms 0 puts l1 next to weir.
"""
import argparse
import csv
import json
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.experiment import median_range, repo_commit, write_csv  # noqa: E402
from weirtb.traffic import iperf_flows  # noqa: E402

MODES = ["none", "pfq", "postack", "tcr", "pep"]
COMMIT = repo_commit()   # written into every row: the code the results come from
CCS = ["paper", "cubic", "bbr"]
# name: (one-way bottleneck delay d in ms, sched= or None for a constant 1 Mbit/s, k)
SCENARIOS = {
    "const-d100": (100, None, 0),
    "const-d200": (200, None, 0),
    "sine-k0.2-d100": (100, "sine:1mbit/0.5mbit/31.42", 0.2),
    "sine-k0.2-d200": (200, "sine:1mbit/0.5mbit/31.42", 0.2),
    "sine-k33-d200": (200, "sine:1mbit/0.5mbit/0.19", 33),
    "const-d300": (300, None, 0),
    "const-d400": (400, None, 0),
    "sine-k0.2-d400": (400, "sine:1mbit/0.5mbit/31.42", 0.2),
}
QUICK = ["const-d200"]
SLOW_START_S = 3        # Fig. 5: goodput over a flow's first seconds
COLORS = {"none": "tab:blue", "pfq": "tab:orange", "postack": "tab:green", "tcr": "tab:red",
          "pep": "tab:purple",
          "pep-bw": "tab:brown"}


AVAIL = "1mbit"         # the class's guaranteed rate: "the bandwidth available to the flow"
CEIL = "10mbit"         # what it may borrow (--ceil 1mbit: weir shapes at the bottleneck's mean)


MGMT_PORT = 8099


def config(path, mode):
    """The access link (10 Mbit/s) with one class guaranteed the bottleneck's mean rate and
    allowed to borrow the whole link: no mode is held back by weir's shaper, and pep (and
    tcr) size their flow's share from the rate the paper's PEP is told is available."""
    wm = ' pep = { watermark = "measured"; };' if mode == "pep-bw" else ""
    mode = "pep" if mode == "pep-bw" else mode
    tree = f"""{{ rate = "10mbit"; default = "exp";
    classes = ( {{ name = "exp"; rate = "{AVAIL}"; ceil = "{CEIL}"; mode = "{mode}"; }} ); }}"""
    body = "" if mode == "none" else f"shaping = {{{wm} outbound = {tree}; inbound = {tree}; }};\n"
    body += f"management = {{ port = {MGMT_PORT}; }};\n"
    path.write_text(weirtb.testbed_config_text(body))
    return path


def set_sender(tb, cc):
    """The sender's congestion control and, for "paper", the route clamps."""
    tb.set_cc("l1", "reno" if cc == "paper" else cc)
    extra = ["cwnd", "lock", "20", "initcwnd", "1"] if cc == "paper" else []
    tb.run("l1", ["ip", "route", "replace", "10.77.0.0/16", "dev", "eth0"] + extra)


def follow_rate(tb, stop, told):
    """Tell weir the bottleneck's rate as it moves (the paper's PEP asks an admission
    control): each time the emulator's rate in force changes (its stats, each second),
    PATCH the class's guaranteed rate, which pep's watermark follows."""
    last = None
    while not stop.wait(0.2):
        try:
            rate = next(iter(tb.wanemu_stats()["paths"].values()))["to_path"]["rate_bps"]
        except (OSError, ValueError, KeyError, StopIteration):
            continue
        if rate and rate != last:
            body = json.dumps({"rate": f"{int(rate)}bit"})
            cp = tb.run("gw", ["curl", "-sf", "-X", "PATCH", "-H", "Content-Type: application/json",
                               "-d", body, f"http://127.0.0.1:{MGMT_PORT}/api/v1/classes/outbound/exp"],
                        check=False)
            if cp.returncode == 0:
                told.append(rate)
            last = rate


def run_one(tb, cfg_dir, mode, cc, secs, follow=False):
    os.environ["WEIR_TESTBED_CFG"] = str(config(cfg_dir / f"{mode}.cfg", mode))
    tb.start_gateway("weir")
    set_sender(tb, cc)
    time.sleep(0.5)
    stop, told = threading.Event(), []
    th = threading.Thread(target=follow_rate, args=(tb, stop, told), daemon=True)
    if follow and mode != "none":
        th.start()
    try:
        r = iperf_flows(tb, n=1, duration=secs, pairs=[("l1", "w1")], interval=1.0)[0]
    finally:
        stop.set()
        if th.is_alive():
            th.join(5)
    pep = dict(tb.weir_stats().get("pep") or {}, told=len(told))
    tb.stop_gateway()
    if r.error:
        print(f"  {mode}/{cc}: iperf3 error {r.error}", flush=True)
    return r, pep


def run_row(tb, cfg_dir, name, cc, mode, rep, run_s, follow):
    d, sched, k = SCENARIOS[name]
    r, pep = run_one(tb, cfg_dir, mode, cc, run_s, follow=follow and sched is not None)
    ivs = [b / 1e6 for b in r.interval_bps]
    row = {"scenario": name, "d_ms": d, "k": k, "cc": cc, "mode": mode, "rep": rep,
           "commit": COMMIT,
           "secs": run_s, "goodput_mbit": round(r.goodput_bps / 1e6, 3),
           "first_s_mbit": round(sum(ivs[:SLOW_START_S]) / max(1, len(ivs[:SLOW_START_S])), 3),
           "retransmits": r.retransmits, "packed": pep.get("packed", 0),
           "pep_retx": pep.get("fast_retx", 0) + pep.get("rto_retx", 0),
           "give_ups": pep.get("give_ups", 0), "told": pep.get("told", 0),
           "intervals": json.dumps([round(x, 3) for x in ivs])}
    print(f"{name:15} {cc:6} {mode:8} run {rep}: {row['goodput_mbit']:6.3f} Mbit/s "
          f"(first {SLOW_START_S} s {row['first_s_mbit']:.3f})", flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--secs", type=int, default=30, help="seconds per run (sine k=0.2: one period is 31 s)")
    ap.add_argument("--access-ms", type=float, default=10,
                    help="one-way delay of the sender's access link to weir (paper: 10)")
    ap.add_argument("--follow", action="store_true",
                    help="sine scenarios: PATCH the class's rate to the bottleneck's as it moves")
    ap.add_argument("--reps", type=int, help="runs per cell (default 5, --quick 3)")
    ap.add_argument("--modes")
    ap.add_argument("--cc")
    ap.add_argument("--scenarios")
    ap.add_argument("--keep", action="store_true",
                    help="keep DIR/pep.csv's rows of the (scenario, sender, mode) not run now")
    ap.add_argument("--ceil", default=CEIL, help="the class's ceil (default 10mbit: no shaping)")
    a = ap.parse_args()
    globals()["CEIL"] = a.ceil
    modes = a.modes.split(",") if a.modes else (["none", "pep"] if a.quick else MODES)
    ccs = a.cc.split(",") if a.cc else (["paper"] if a.quick else CCS)
    names = a.scenarios.split(",") if a.scenarios else (QUICK if a.quick else list(SCENARIOS))
    secs = 5 if a.quick else a.secs
    reps = a.reps or (3 if a.quick else 5)
    out = Path(a.out) if a.out else (Path(tempfile.mkdtemp(prefix="pep-exp-")) if a.quick
                                      else REPO / "docs" / "results" / "pep")
    out.mkdir(parents=True, exist_ok=True)
    cfg_dir = Path(tempfile.mkdtemp(prefix="pep-cfg-"))
    rows = []
    if a.keep and (out / "pep.csv").exists():
        rows = [r for r in csv.DictReader(open(out / "pep.csv"))
                if not (r["scenario"] in names and r["mode"] in modes and r["cc"] in ccs)]
        for r in rows:
            for k in ("goodput_mbit", "first_s_mbit"):
                r[k] = float(r[k])
            r.setdefault("rep", 0)
    for name in names:
        d, sched, k = SCENARIOS[name]
        # A slow sine's phase is the emulator's, not the run's: a run of one
        # whole period sees the same mean rate (1 Mbit/s) in every mode.
        run_s = max(secs, 32) if k and k < 1 and not a.quick else secs
        path = PathSpec(delay=d + 10, limit=50, **({"sched": sched, "sched_dir": "to_path"}
                                                   if sched else {"rate": "1mbit"}))
        os.environ["WEIR_TESTBED_CFG"] = str(config(cfg_dir / "none.cfg", "none"))
        access = [PathSpec(delay=a.access_ms, rate="10mbit", limit=50)] if a.access_ms else None
        tb = weirtb.Testbed(lan=1, wan=1, paths=[path], lan_paths=access)
        tb.claim().up()
        try:
            rows = [x for x in rows if (x["scenario"], x["cc"], x["mode"]) not in
                    {(name, cc, mode) for cc in ccs for mode in modes}]
            for rep in range(reps):
                for cc in ccs:
                    for mode in modes:
                        rows.append(run_row(tb, cfg_dir, name, cc, mode, rep, run_s, a.follow))
        finally:
            tb.down()
            bad = tb.bad_weir_exits()
            if bad:
                print(f"weir exited {[rc for rc, _ in bad]}", file=sys.stderr)
                sys.exit(1)
        write(out, rows, modes)         # after each scenario: a long run stopped keeps its part
    print(f"wrote {out}/pep.csv, pep.md, pep.png")


def write(out, rows, modes):
    write_csv(out / "pep.csv", rows)
    keys = sorted({(r["scenario"], r["cc"]) for r in rows}, key=lambda x: (list(SCENARIOS).index(x[0]), x[1]))
    runs = {}
    for r in rows:
        runs.setdefault((r["scenario"], r["cc"], r["mode"]), []).append(r)
    commits = sorted({r.get("commit") or "unknown" for r in rows})
    lines = [f"Median of the runs (lowest-highest, number of runs); weir at {', '.join(commits)}.",
             "",
             "| scenario | sender | " + " | ".join(modes) + " | pep / none |",
             "|---|---|" + "---|" * (len(modes) + 1)]
    for what, col in (("mean goodput, Mbit/s", "goodput_mbit"),
                      (f"goodput in the first {SLOW_START_S} s, Mbit/s", "first_s_mbit")):
        lines.append(f"| **{what}** | | " + " | " * len(modes) + " |")
        for s, cc in keys:
            cells = []
            for m in modes:
                v = [float(x[col]) for x in runs.get((s, cc, m), [])]
                med, lo, hi = median_range(v)
                cells.append(f"{med:.3f} ({lo:.3f}-{hi:.3f}, {len(v)})" if v else "-")
            p = median_range([float(x[col]) for x in runs.get((s, cc, "pep"), [])])[0]
            n = median_range([float(x[col]) for x in runs.get((s, cc, "none"), [])])[0]
            ratio = f"{p / n:.2f}x" if p == p and n == n and n else "-"
            lines.append(f"| {s} | {cc} | " + " | ".join(cells) + f" | {ratio} |")
    (out / "pep.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no PNG (apt-get install python3-matplotlib)")
        return
    fig, axes = plt.subplots(len(keys), 1, figsize=(8, 2.2 * len(keys)), squeeze=False)
    for ax, (s, cc) in zip(axes[:, 0], keys):
        for m in modes:
            for i, r in enumerate(runs.get((s, cc, m), [])):
                iv = json.loads(r["intervals"])
                ax.plot(range(1, len(iv) + 1), iv, label=m if i == 0 else None,
                        color=COLORS.get(m), alpha=0.6, marker="." if m == "pep" else None)
        ax.set_title(f"{s}, sender {cc}", fontsize=9)
        ax.set_ylabel("Mbit/s")
        ax.set_ylim(0, 2)
    axes[0, 0].legend(fontsize=7, ncol=len(modes))
    axes[-1, 0].set_xlabel("s")
    fig.tight_layout()
    fig.savefig(out / "pep.png", dpi=80)


if __name__ == "__main__":
    main()

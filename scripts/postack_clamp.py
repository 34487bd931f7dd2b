#!/usr/bin/python3
"""PostACK's share clamp, before and after (issue 19 item 5), side by side in the testbed.

    scripts/postack_clamp.py [a,b,fig8,loss,loss9 | all] [--quick] [--sat-secs S] [--out DIR]
                             [--settings off,0,0.5,1] [--repeat N] [--tag T]

Each case runs weir's `postack` mode once per setting of --settings on the same testbed,
one run after the other (alternating, the same binary, only the config differs): `off` is
`shaping.postack.clamp = false` (only ack_limit bounds a window, main's behaviour before
the clamp) and a number M is `clamp = true; clamp_margin = M` (share x path RTT x (1 + M)
plus max(2 MSS, share x 5 ms)). The default, `off,0`, is the clamp's first before/after.
Senders use cubic.

  a     8 uploads in a 20 Mbit/s class, 5 ms path (2.5 ms one way), 20 s, a ping probe
        in the class (scripts/paper_experiments.py's run and classes).
  b     the satellite case of scripts/ipabr_experiments.py: 32 uploads, 1.536 Mbit/s,
        450 ms one way, the emulator's drop-tail queue 30, --sat-secs (default 60), with
        the ping probe moved into the class.
  fig8  seed 001's Fig. 8 buffer experiment for postack (500 KB/s, 50 ms, 8 and 32 flows,
        class limits 9 and 243, 14 s).
  loss  one flow under WAN loss, where seed 001 says window sizing hurts (Sec. 2.4: a
        loss halves a window cut to the BDP; a window of 3 segments or fewer turns a loss
        into a timeout): its Fig. 9 (200 KB/s, 50 ms, 1 % and 3 % random loss, 24 s) and
        Fig. 11 (10 KB/s with every 40th packet lost, reno and cubic; 100 KB/s with 1/100,
        cubic; 30 s).
  loss9 Fig. 9's two rows of `loss` only (1 % and 3 %), for repeats.

Measured per run: the class's goodput at the receivers, the probe's median RTT, the senders'
smoothed RTT (`ss -ti` in the senders' namespaces once a second from 4 s on, median over
samples and flows; iperf3's mean RTT beside it), Fig. 8's buffer figures (data packets
queued in the class, mean and peak; ACKs held, peak), drops at the gateway while the
transfers ran and in the 10 s after the last one ended, clients not finished 60 s after
their end. Writes DIR/clamp-<cases>[-young<N>][-<tag>].csv, .md (a table) and .png, e.g.
DIR/clamp-a-b-fig8-loss.csv for `all`; --young N sets every run's shaping.young_bytes;
--repeat N runs the whole alternation N times (column `run`). --quick: case a only, 8 s
runs (CI checks that the script works; its numbers mean little).
"""
import argparse
import csv
import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import PathSpec  # noqa: E402
import paper_experiments as pe  # noqa: E402
import ipabr_experiments as ie  # noqa: E402

AFTER_S = 10.0   # how long after the transfers' end drops are still counted
KEYS = ["case", "run", "young", "clamp", "margin", "flows", "limit", "secs", "goodput_kbps", "class_kbps", "target_kbps",
        "probe_ms_median", "probe_lost", "sender_srtt_ms", "sender_srtt_p90_ms", "iperf_rtt_ms",
        "data_pkts_mean", "data_pkts_peak", "acks_held_peak", "drops_during", "drops_after",
        "retx", "unfinished", "win_clamped", "clamp_unknown", "finished_goodput_kbps",
        "esdl_mean_ms", "esdl_max_ms"]


YOUNG = None     # --young: shaping.young_bytes for every run (None: weir's default)
RUN = 1          # which repeat (--repeat) the rows are of


def parse_setting(s):
    """`off` -> None (clamp off); a number -> that margin with the clamp on."""
    return None if s == "off" else float(s)


def setting_cols(margin):
    return {"clamp": "off" if margin is None else "on",
            "margin": "" if margin is None else f"{margin:g}"}


def with_clamp(text, margin):
    """A testbed config's text with shaping.postack.clamp and clamp_margin (margin None:
    the clamp off) and young_bytes set; every setting is written, whatever the default."""
    assert "shaping = {" in text
    young = f"\n  young_bytes = {YOUNG};" if YOUNG is not None else ""
    pa = "clamp = false;" if margin is None else f"clamp = true; clamp_margin = {float(margin)!r};"
    return text.replace("shaping = {", f"shaping = {{\n  postack = {{ {pa} }};{young}", 1)


def young_label():
    return "default" if YOUNG is None else str(YOUNG)


def patch_configs(margin):
    """Make both experiment scripts write configs with the clamp on or off."""
    def pe_config(path, mode, rate_kBps, limit=0):
        p = _pe_config(path, mode, rate_kBps, limit)
        p.write_text(with_clamp(p.read_text(), margin))
        return p

    def ie_config(path, *a, **kw):
        p = _ie_config(path, *a, **kw)
        t = with_clamp(p.read_text(), margin)
        # The probe (ICMP) in the experiment class, behind its flows.
        p.write_text(t.replace("rules = (\n  ", 'rules = (\n  { class = "exp"; proto = "icmp"; },\n  ', 1))
        return p
    pe.config = pe_config
    ie.weir_config = ie_config


_pe_config, _ie_config = pe.config, ie.weir_config


def probe(tb, src, dst, seconds, out):
    """ping src -> dst twice a second, waiting up to 60 s for each reply: RTTs in ms,
    and how many got none."""
    res = tb.run(src, ["ping", "-i", "0.5", "-c", str(int(seconds * 2)), "-W", "60",
                       weirtb.Testbed.addr(dst)], timeout=seconds + 90, check=False).stdout
    rtts = [float(x) for x in re.findall(r"time=([\d.]+)", res)]
    out.extend(rtts)


class Watch(pe.Periodic):
    """Once a second: the senders' srtt (ss -ti) from `skip` s on, and the gateway's
    drop counter with its time."""

    every = 1.0

    def __init__(self, tb, hosts, skip=4.0):
        super().__init__()
        self.tb, self.hosts, self.skip = tb, hosts, skip
        self.srtt, self.drops = [], []
        self._t0 = time.monotonic()

    def sample(self):
        try:
            c = pe.gateway_counters(self.tb)
            self.drops.append((time.monotonic(), c[0], c[4]))
        except Exception:  # noqa: BLE001 - a half-written stats file; the srtt still counts
            pass
        if time.monotonic() - self._t0 < self.skip:
            return
        for h in self.hosts:
            out = self.tb.run(h, ["ss", "-tin", "state", "established",
                                  "( sport >= :6000 and sport <= :6099 )"],
                              timeout=10, check=False).stdout
            self.srtt += [float(x) for x in re.findall(r"\brtt:([\d.]+)/", out)]

    def drops_at(self, t):
        """The drop counter at time t, of the weir running at the end (a restart
        resets it: rows before the last restart are not its)."""
        rows = self.drops
        for i in range(len(rows) - 1, 0, -1):
            if rows[i][1] < rows[i - 1][1]:
                rows = rows[i:]
                break
        before = [d for tt, _, d in rows if tt <= t]
        return before[-1] if before else 0


def stats_row(tb):
    st = tb.weir_stats()
    ports = st.get("ports") or {}
    clamped = sum((p.get("win_clamped") or 0) for p in ports.values()
                  if isinstance(p, dict))
    return clamped, (st.get("postack") or {}).get("clamp_unknown", 0)


def srtt_summary(xs):
    xs = sorted(xs)
    if not xs:
        return float("nan"), float("nan")
    return statistics.median(xs), xs[int(len(xs) * 0.9)]


def drops_after_end(tb, w, t_end):
    """Drops in the AFTER_S seconds after t_end (the last client's exit)."""
    time.sleep(max(0.0, t_end + AFTER_S + 1.2 - time.monotonic()))
    d_end = w.drops_at(t_end)
    return d_end, w.drops_at(t_end + AFTER_S) - d_end


def case_a(tb, cfgdir, margin, secs, n=8, rate_kBps=2500, limit=0, case="a", cc="cubic",
           probe=True):
    """paper_experiments.run with the watcher around it."""
    patch_configs(margin)
    hosts = tb.lan_hosts
    with Watch(tb, hosts) as w:
        t0 = time.monotonic()
        r = pe.run(tb, cfgdir, "postack", rate_kBps, n, secs, limit=limit, cc=cc, probe=probe)
        t_end = time.monotonic()
        d_end, d_after = drops_after_end(tb, w, t_end)
    clamped, unknown = stats_row(tb)
    med, p90 = srtt_summary(w.srtt)
    return {
        "case": case, "run": RUN, "young": young_label(), **setting_cols(margin), "flows": n, "limit": limit, "secs": secs,
        "goodput_kbps": r["goodput_kBps"] * 8, "class_kbps": r["class_kBps"] * 8,
        "target_kbps": rate_kBps * 8, "probe_ms_median": r["probe_ms_median"], "probe_lost": "",
        "sender_srtt_ms": med, "sender_srtt_p90_ms": p90, "iperf_rtt_ms": float("nan"),
        "data_pkts_mean": r["data_pkts_mean"], "data_pkts_peak": r["data_pkts_peak"],
        "acks_held_peak": r["acks_held_peak"], "drops_during": d_end - w.drops_at(t0),
        "drops_after": d_after, "retx": r["retx_ratio"],
        "unfinished": r["iperf_errors"], "win_clamped": clamped, "clamp_unknown": unknown,
        "_wall": t_end - t0,
    }


def case_b(tb, margin, secs):
    """ipabr_experiments.run (the satellite case) with the watcher, a sampler of the
    class's buffer and a probe around it."""
    patch_configs(margin)
    rtts = []
    pr = threading.Thread(target=probe, args=(tb, tb.lan_hosts[0], tb.wan_hosts[0], secs - 15,
                                              rtts), daemon=True)
    with Watch(tb, tb.lan_hosts, skip=10.0) as w, pe.Sampler(tb) as s:
        t0, s0 = time.monotonic(), s.now()
        timer = threading.Timer(10.0, pr.start)
        timer.start()
        row, _, _ = ie.run(tb, ie.CAPDIR, "postack", "sat", secs, 30, 20, 0.9)
        t_end = time.monotonic()
        d_end, d_after = drops_after_end(tb, w, t_end)
        pr.join(timeout=90)
    # While the transfers ran (from 10 s: the senders' first windows are in flight).
    rate = s.rate_between(s0 + 10.0, s0 + secs)
    qmean, qmax, acks = s.buffer_between(s0 + 10.0, s0 + secs)
    clamped, unknown = stats_row(tb)
    med, p90 = srtt_summary(w.srtt)
    rtts.sort()
    return {
        "case": "b", "run": RUN, "young": young_label(), **setting_cols(margin), "flows": ie.FLOWS, "limit": 30,
        "secs": secs,
        # iperf3 reports only for the clients that finished: the class's own bytes
        # (wire, 10 s to the end) as payload stand for the goodput.
        "goodput_kbps": rate * 8 / 1e3 * pe.PAYLOAD_SHARE, "class_kbps": rate * 8 / 1e3,
        "finished_goodput_kbps": row["total_kbps"],
        "target_kbps": ie.LINK_BPS / 1e3,
        "probe_ms_median": rtts[len(rtts) // 2] if rtts else float("nan"),
        "probe_lost": int((secs - 15) * 2) - len(rtts),
        "sender_srtt_ms": med, "sender_srtt_p90_ms": p90, "iperf_rtt_ms": row["sender_rtt_ms"],
        "data_pkts_mean": qmean, "data_pkts_peak": qmax, "acks_held_peak": acks,
        "drops_during": d_end - w.drops_at(t0), "drops_after": d_after,
        "retx": row["retx_segments"] / max(row["segments"], 1), "unfinished": row["iperf_errors"],
        "win_clamped": clamped, "clamp_unknown": unknown, "_wall": t_end - t0,
        "flow_std_kbps_median": row["flow_std_kbps_median"], "jain": row["jain"],
        "esdl_mean_ms": row["esdl_mean_ms"], "esdl_max_ms": row["esdl_max_ms"],
    }


def testbed(paths):
    for c in ("reno", "cubic", "bbr"):
        weirtb.topology.allow_congestion_control(c)
    tb = weirtb.Testbed(lan=2, wan=len(paths), gateway="weir", emu="wanemu", paths=paths)
    tb.claim().up()
    for h in tb.lan_hosts + tb.wan_hosts:
        tb.set_cc(h, "cubic")
    return tb


def fmt(v):
    if isinstance(v, float):
        return "-" if v != v else f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"
    return str(v)


def write(out, rows, cases, tag=""):
    out.mkdir(parents=True, exist_ok=True)
    name = ("clamp-" + "-".join(cases) + ("" if YOUNG is None else f"-young{YOUNG}") +
            (f"-{tag}" if tag else ""))
    with open(out / f"{name}.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(KEYS)
        for r in rows:
            w.writerow([r.get(k, "") for k in KEYS])
    cols = ["case", "run", "young", "clamp", "margin", "flows", "limit", "goodput_kbps", "class_kbps", "target_kbps",
            "retx",
            "probe_ms_median", "probe_lost",
            "sender_srtt_ms", "sender_srtt_p90_ms", "iperf_rtt_ms", "data_pkts_mean",
            "data_pkts_peak", "acks_held_peak", "drops_during", "drops_after", "unfinished"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(k, "")) for k in cols) + " |")
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    try:
        plot(out / f"{name}.png", rows)
    except ImportError as e:  # matplotlib is Debian's python3-matplotlib
        print(f"no plot: {e}")


def label(r):
    return (f"{r['case']} {r['flows']}f" + (f" l{r['limit']}" if r["case"] == "fig8" else "") +
            (f" #{r['run']}" if r.get("run", 1) != 1 else ""))


def setting_label(r):
    return "off" if r["clamp"] == "off" else f"on m={r['margin']}"


def plot(path, rows):
    """Senders' srtt (log) and the class's goodput, one bar per setting, per case."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = list(dict.fromkeys(label(r) for r in rows))
    fig, axs = plt.subplots(1, 2, figsize=(14, 4))
    settings = list(dict.fromkeys(setting_label(r) for r in rows))
    width = 0.8 / len(settings)
    for k, st in enumerate(settings):
        by = {label(r): r for r in rows if setting_label(r) == st}
        xs = [i + (k - (len(settings) - 1) / 2) * width for i in range(len(labels))]
        axs[0].bar(xs, [by[x]["sender_srtt_ms"] if x in by else 0 for x in labels], width,
                   label=f"clamp {st}")
        axs[1].bar(xs, [by[x]["goodput_kbps"] / by[x]["target_kbps"] if x in by else 0
                        for x in labels], width, label=f"clamp {st}")
    for ax, title in zip(axs, ("senders' srtt, ss -ti median (ms)", "goodput / class rate")):
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(title)
    axs[0].set_yscale("log")
    axs[0].legend()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="?", default="all")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sat-secs", type=int, default=60)
    ap.add_argument("--young", type=int, help="shaping.young_bytes for every run")
    ap.add_argument("--out", default=str(REPO / "docs" / "results" / "postack-clamp"))
    ap.add_argument("--settings", default="off,0",
                    help="comma-separated: off (clamp off) or a margin M (clamp on, clamp_margin M)")
    ap.add_argument("--repeat", type=int, default=1, help="run every case's alternation N times")
    ap.add_argument("--tag", default="", help="appended to the output files' name")
    args = ap.parse_args()
    global YOUNG, RUN
    YOUNG = args.young
    settings = [parse_setting(s) for s in args.settings.split(",")]
    cases = ["a", "b", "fig8", "loss"] if args.cases == "all" else args.cases.split(",")
    if args.quick:
        cases = ["a"]
        global AFTER_S
        AFTER_S = 3.0
    out = Path(args.out)
    cfgdir = Path(os.environ.get("TMPDIR", "/tmp")) / "postack-clamp-cfg"
    cfgdir.mkdir(parents=True, exist_ok=True)
    ie.CAPDIR.mkdir(parents=True, exist_ok=True)
    rows = []
    if "a" in cases:
        tb = testbed([PathSpec(delay=2.5)])
        try:
            for RUN in range(1, args.repeat + 1):
                for margin in settings:
                    r = case_a(tb, cfgdir, margin, 8 if args.quick else 20)
                    rows.append(r)
                    print({k: fmt(v) for k, v in r.items()}, flush=True)
        finally:
            tb.down()
    if "b" in cases:
        tb = ie.testbed(30, ie.DELAY_MS)
        try:
            for RUN in range(1, args.repeat + 1):
                for margin in settings:
                    r = case_b(tb, margin, args.sat_secs)
                    rows.append(r)
                    print({k: fmt(v) for k, v in r.items()}, flush=True)
        finally:
            if tb.gateway_running:
                tb.stop_gateway()
            tb.down()
    if "loss" in cases or "loss9" in cases:
        grid = ((1, 0, 200, ["cubic"], 24), (3, 0, 200, ["cubic"], 24),
                (0, 40, 10, ["reno", "cubic"], 30), (0, 100, 100, ["cubic"], 30))
        for loss, ploss, rate, ccs, secs in grid if "loss" in cases else grid[:2]:
            tb = testbed([PathSpec(delay=25, loss=loss, ploss=ploss)])
            try:
                for RUN in range(1, args.repeat + 1):
                    for cc in ccs:
                        for margin in settings:
                            tag = f"loss {loss}%" if loss else f"loss 1/{ploss}"
                            r = case_a(tb, cfgdir, margin, secs, n=1, rate_kBps=rate,
                                       case=f"{tag} {cc}", cc=cc, probe=False)
                            rows.append(r)
                            print({k: fmt(v) for k, v in r.items()}, flush=True)
            finally:
                tb.down()
    if "fig8" in cases:
        tb = testbed([PathSpec(delay=25)])
        try:
            for RUN in range(1, args.repeat + 1):
                for n in (8, 32):
                    for lim in (9, 243):
                        for margin in settings:
                            r = case_a(tb, cfgdir, margin, 14, n=n, rate_kBps=500, limit=lim,
                                       case="fig8")
                            rows.append(r)
                            print({k: fmt(v) for k, v in r.items()}, flush=True)
        finally:
            tb.down()
    write(out, rows, cases, args.tag)


if __name__ == "__main__":
    main()

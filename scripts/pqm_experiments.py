#!/usr/bin/python3
"""The thesis' PQM experiments (seed 004, Sec. 5.4) scaled to the testbed.

Thesis: a 64 Mbit/s link, 20 TCP flows (RTT 30 ms), from 20 s to 60 s a UDP blast of
1.5x the link (Exp. 1) or 1x (Exp. 2) split into 2/4/6/8 flows; 1000-byte packets, or
TCP 400 B / UDP 800 B (Exp. 3); RED and CHOKe with min_th 100, max_th 200, a 300-packet
queue; PQM with REM's gamma 0.005, alpha 0.1, phi 1.001, 30 ms and 1000 B bounds.

Here: one class of LINK Mbit/s (20 by default) in weir's outbound tree, the senders on
two LAN hosts, receivers on two WAN hosts behind 15 ms one-way paths (RTT 30 ms). The
queue is scaled with the link so it holds the same time: 300 x 20/64 = 94 packets,
min_th 31, max_th 62, REM's target 20 x 20/64 = 6 packets, and gamma x 64/20 so the
price moves as fast per second as at 64 Mbit/s (its step is in packets per interval).
Each run: TCP alone for WARM s, then the blast for BLAST s; TCP's share is its goodput
at the receiver over the blast (after 2 s of it), converted to wire bytes, over the
class rate. Side by side: weir fifo leaves with no queue manager (tail drop), RED,
CHOKe, PQM, PQM-PB; weir pfq and postack leaves; Linux HTB with a pfifo leaf (the kernel
here has no RED or CHOKe qdisc).

    scripts/pqm_experiments.py [--quick] [--out docs/results/pqm] [--gateways a,b]
                               [--exps 1,2,3] [--splits 2,4,6,8] [--blast 14] [--cc cubic]
                               [--runs N] [--queue scaled|thesis|both] [--tcp-legacy]
    scripts/pqm_experiments.py all [--dry-run]     # every result of docs/results/pqm

--runs: runs per cell, the table gives median (min-max). --queue thesis: the thesis' packet
counts unscaled (300, 100, 200), the buffer its Eq. 5.4 says CHOKe needs. --tcp-legacy:
senders without RACK and tail-loss probes, nearer the loss recovery of the thesis' ns-2 TCP.

--quick: Exp. 1 with a 2-flow blast, fifo, pqm and pqm-pb only, short runs (CI's check that
the script works: test/py/test_pqm.py). Needs root; run it under the engineer's
testbed prefix and lock (docs/testbed.md).
"""
import argparse
import csv
import json
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
from weirtb.experiment import repo_commit, write_csv as write_rows  # noqa: E402

THESIS_LINK = 64
GATEWAYS = ["fifo", "red", "choke", "pqm", "pqm-pb", "pfq", "postack", "pfq-l94", "postack-l94",
            "linux-htb"]
# What the thesis' text says of Figs. 5.1-5.3 (TCP's share of the link); the figures'
# exact values are not in the text, so only these are quoted.
THESIS = {"red": "smallest (RED does not protect TCP)", "choke": "small, near RED's",
          "pqm": "0.3-0.5", "pqm-pb": "0.9"}
TCP_PORT, UDP_PORT = 5201, 5301
BLAST = REPO / "scripts" / "weirtb" / "blast.py"
EXPS = {1: {"blast": 1.5, "tcp": 1000, "udp": 1000},
        2: {"blast": 1.0, "tcp": 1000, "udp": 1000},
        3: {"blast": 1.5, "tcp": 400, "udp": 800}}


def scaled(link, queue="scaled"):
    """The thesis' queue settings scaled to `link` Mbit/s (same queueing time), or with
    queue="thesis" its packet counts as they are (300/100/200: 3.2x the queueing time at
    20 Mbit/s; the thesis argues CHOKe needs large buffers, Eq. 5.4)."""
    f = link / THESIS_LINK if queue == "scaled" else 1.0
    return {"limit": round(300 * f), "min_th": round(100 * f), "max_th": round(200 * f),
            "target": max(1, round(20 * f)), "gamma": 0.005 / f}


def weir_cfg(d, gw, link, queue="scaled"):
    s = scaled(link, queue)
    # Per-flow queues buffer per flow (flow_limit, 128): "pfq"/"postack" run as weir
    # runs them, the class limit left at its default; "-l94" gives them the FIFO's
    # 94-packet class limit as well (a full class then drops whatever arrives).
    mode = gw.split("-")[0] if gw.startswith(("pfq", "postack")) else "fifo"
    aqm = f'aqm = "{gw}"; ' if gw in ("red", "choke", "pqm", "pqm-pb") else ""
    limit = "" if gw in ("pfq", "postack") else f'limit = {s["limit"]}; '
    body = (f'shaping = {{\n  outbound = {{ rate = "{link}mbit"; default = "all"; classes = (\n'
            f'    {{ name = "all"; rate = "{link}mbit"; mode = "{mode}"; {limit}'
            f'{aqm}}}\n  ); }};\n'
            f'  red = {{ min_th = {s["min_th"]}; max_th = {s["max_th"]}; }};\n'
            f'  pqm = {{ gamma = {s["gamma"]:.6f}; target = {s["target"]}; rtt_min_us = 30000; '
            f'pkt_max = 1000; pkt_mean = 1000; }};\n}};\n')
    p = d / f"pqm-{gw}-{queue}.cfg"
    p.write_text(weirtb.testbed_config_text(body))
    return p


def htb_spec(link, queue="scaled"):
    return {"outbound": {"rate": f"{link}mbit", "classes": [{"name": "all", "rate": f"{link}mbit"}]},
            "limit": scaled(link, queue)["limit"]}


def _iperf_json(p, timeout):
    try:
        out, err = p.communicate(timeout=timeout)
    except Exception:
        p.kill()
        out, err = p.communicate()
    try:
        return json.loads(out)
    except ValueError:
        raise RuntimeError(f"iperf3 gave no JSON: {err[-300:]} {out[-300:]}")


def _recv_rates(j):
    """Per-second receive rates (bit/s) from iperf3 -J --get-server-output."""
    so = j.get("server_output_json") or {}
    return [iv["sum"]["bits_per_second"] for iv in so.get("intervals", [])]


def run_one(tb, link, exp, k, warm, blast):
    """One run: 20 TCP flows l1 -> w1, from `warm` s a UDP blast l2 -> w2 of k flows.
    Returns a dict of shares and rates."""
    e = EXPS[exp]
    tcp_ip, udp_ip = e["tcp"], e["udp"]
    mss = tcp_ip - 40                    # with timestamps: payload tcp_ip - 52
    udp_payload = udp_ip - 28
    total = warm + blast
    udp_bps_ip = e["blast"] * link * 1e6
    per_flow = udp_bps_ip / k * udp_payload / udp_ip   # the blaster counts payload
    w1, w2 = tb.addr(tb.wan_hosts[0]), tb.addr(tb.wan_hosts[1])
    srv = [tb.popen(tb.wan_hosts[0], ["iperf3", "-s", "-1", "-p", str(TCP_PORT), "-J"]),
           tb.popen(tb.wan_hosts[1], ["/usr/bin/python3", str(BLAST), "recv", "--port",
                                      str(UDP_PORT), "--seconds", str(blast)])]
    weirtb.traffic._wait_listening(tb, tb.wan_hosts[0], TCP_PORT)
    if srv[1].stdout.readline().strip() != "READY":
        raise RuntimeError("blast receiver did not start")
    res = {}
    try:
        tcp = tb.popen(tb.lan_hosts[0], ["iperf3", "-c", w1, "-p", str(TCP_PORT), "-P", "20",
                                         "-M", str(mss), "-t", str(total), "-i", "1", "-J",
                                         "--get-server-output"])

        def udp_run():
            time.sleep(warm)
            p = tb.popen(tb.lan_hosts[1], ["/usr/bin/python3", str(BLAST), "send", "--host", w2,
                                           "--port", str(UDP_PORT), "--flows", str(k),
                                           "--rate", f"{per_flow * k:.0f}",
                                           "--size", str(udp_payload), "--seconds", str(blast)])
            res["udp_sent"] = _iperf_json(p, blast + 30)
        th = threading.Thread(target=udp_run)
        th.start()
        res["tcp"] = _iperf_json(tcp, total + 30)
        th.join()
        res["udp"] = _iperf_json(srv[1], 30)
    finally:
        for p in srv:
            if p.poll() is None:
                p.kill()
            try:
                p.communicate()
            except ValueError:
                pass            # already read to the end
    t_rates = _recv_rates(res["tcp"])
    u_rates = [8.0 * b for b in res["udp"]["bytes_per_s"]]
    # The blast's seconds, less its first 2 (the queue manager's reaction).
    win = t_rates[warm + 2:warm + blast]
    uwin = u_rates[2:blast]
    if not win:
        raise RuntimeError(f"too few TCP intervals: {len(t_rates)}")
    tcp_good = sum(win) / len(win)
    udp_good = sum(uwin) / len(uwin) if uwin else 0.0
    sent = res.get("udp_sent", {}).get("sent", 0)
    if sent < 0.9 * udp_bps_ip / (udp_ip * 8) * blast:
        raise RuntimeError(f"the blaster sent only {sent} datagrams")
    # Wire bytes per payload byte (Ethernet header + FCS/preamble/IFG as weir counts: 14 + 24).
    tcp_wire = tcp_good * (tcp_ip + 38) / (tcp_ip - 52)
    udp_wire = udp_good * (udp_ip + 38) / (udp_ip - 28)
    link_bps = link * 1e6
    retx = sum(s.get("sender", {}).get("retransmits", 0) or 0
               for s in res["tcp"].get("end", {}).get("streams", []))
    alone = t_rates[1:warm]
    return {"tcp_share": tcp_wire / link_bps, "udp_share": udp_wire / link_bps,
            "tcp_mbit": tcp_good / 1e6, "udp_mbit": udp_good / 1e6,
            "tcp_alone_mbit": sum(alone) / len(alone) / 1e6 if alone else 0.0,
            "tcp_retx": retx}


FIELDS = ["exp", "udp_flows", "gateway", "queue", "run", "tcp_share", "udp_share", "tcp_mbit",
          "udp_mbit", "tcp_alone_mbit", "tcp_retx", "drops_qm", "drops_aqm", "drops_class",
          "drops_choke", "drops_victim", "drops_early", "drops_forced", "monitored",
          "monitor_full", "drops_penalty", "prob", "fair_bps", "state_bytes", "cc", "link_mbit",
          "commit"]


COUNTERS = ("drops_qm", "drops_aqm", "drops_class", "drops_penalty", "drops_choke",
            "drops_victim", "drops_early", "drops_forced")


def write_csv(path, rows):
    write_rows(path, rows, FIELDS)


def qm_snapshot(tb):
    try:
        c = tb.weir_stats()["shaping"]["outbound"]["classes"]["all"]
    except Exception:
        return {}
    q = c.get("qm", {})
    return {"drops_qm": c.get("drops_qm"), "drops_aqm": c.get("drops_aqm"),
            "drops_class": c.get("drops_class"), "monitored": q.get("monitored"),
            "monitor_full": q.get("monitor_full"), "drops_penalty": q.get("drops_penalty"),
            "prob": q.get("prob"), "fair_bps": q.get("fair_bps"), "state_bytes": q.get("state_bytes"),
            "drops_choke": q.get("drops_choke"), "drops_victim": q.get("drops_victim"),
            "drops_early": q.get("drops_early"), "drops_forced": q.get("drops_forced")}


def plot(rows, out, link):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (apt-get install python3-matplotlib): no PNG", file=sys.stderr)
        return
    exps = sorted({r["exp"] for r in rows})
    fig, axes = plt.subplots(1, len(exps), figsize=(5 * len(exps), 4), squeeze=False)
    for ax, exp in zip(axes[0], exps):
        for gw, qu in [(g, q) for g in GATEWAYS for q in ("scaled", "thesis")]:
            by = {}
            for r in rows:
                if r["exp"] == exp and r["gateway"] == gw and r.get("queue", "scaled") == qu:
                    by.setdefault(int(r["udp_flows"]), []).append(float(r["tcp_share"]))
            if not by:
                continue
            xs = sorted(by)
            st = [stat(by[x]) for x in xs]
            ax.errorbar(xs, [m for m, _, _ in st], yerr=[[m - lo for m, lo, _ in st],
                                                         [hi - m for m, _, hi in st]],
                        marker="o", capsize=3,
                        label=gw + ("" if qu == "scaled" else " (300-packet queue)"))
        ax.set_title(f"Exp. {exp}: blast {EXPS[exp]['blast']}x, TCP {EXPS[exp]['tcp']} B / "
                     f"UDP {EXPS[exp]['udp']} B", fontsize=9)
        ax.set_xlabel("UDP flows in the blast")
        ax.set_ylabel(f"TCP share of the {link} Mbit/s class (median, min-max)")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "pqm.png", dpi=110)


def stat(vals):
    """median, min, max"""
    v = sorted(vals)
    n = len(v)
    return (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2), v[0], v[-1]


def cell(vals):
    if not vals:
        return "-"
    m, lo, hi = stat(vals)
    return f"{m:.2f}" if len(vals) == 1 else f"{m:.2f} ({lo:.2f}-{hi:.2f})"


def table(rows, link):
    gws = [g for g in GATEWAYS if any(r["gateway"] == g for r in rows)]
    queues = sorted({r.get("queue", "scaled") for r in rows})
    runs = max(sum(1 for x in rows if (x["exp"], x["udp_flows"], x["gateway"], x.get("queue"))
                   == (r["exp"], r["udp_flows"], r["gateway"], r.get("queue"))) for r in rows)
    lines = [f"TCP's share of the {link} Mbit/s class during the blast (20 TCP flows, RTT 30 ms); "
             f"median (min-max) of up to {runs} runs; weir at {rows[0].get('commit', '?')}",
             "", "| exp | UDP flows | queue | " + " | ".join(gws) + " | thesis (text) |",
             "|---|---|---|" + "---|" * (len(gws) + 1)]
    keys = sorted({(r["exp"], r["udp_flows"], r.get("queue", "scaled")) for r in rows})
    for exp, k, qu in keys:
        cells = [cell([float(x["tcp_share"]) for x in rows if x["exp"] == exp and
                       x["udp_flows"] == k and x["gateway"] == gw and
                       x.get("queue", "scaled") == qu]) for gw in gws]
        th = "; ".join(f"{g} {v}" for g, v in THESIS.items()) if (exp, k, qu) == keys[0] else ""
        lines.append(f"| {exp} | {k} | {qu} | " + " | ".join(cells) + f" | {th} |")
    # The same runs against what TCP got alone in the run's first seconds: on a loaded
    # machine TCP alone may fall short of the class, and this ratio does not depend on it.
    lines += ["", "TCP's goodput during the blast / its goodput alone (first seconds of the run)",
              "", "| exp | UDP flows | queue | " + " | ".join(gws) + " |",
              "|---|---|---|" + "---|" * len(gws)]
    for exp, k, qu in keys:
        cells = [cell([float(x["tcp_mbit"]) / float(x["tcp_alone_mbit"]) for x in rows
                       if x["exp"] == exp and x["udp_flows"] == k and x["gateway"] == gw and
                       x.get("queue", "scaled") == qu and float(x.get("tcp_alone_mbit") or 0) > 0])
                 for gw in gws]
        lines.append(f"| {exp} | {k} | {qu} | " + " | ".join(cells) + " |")
    if len(queues) > 1 or queues != ["scaled"]:
        lines += ["", "queue: scaled = 94 packets, min_th 31, max_th 62 (the thesis' queueing "
                  "time at 20 Mbit/s); thesis = 300, 100, 200 packets as in the thesis"]
    return "\n".join(lines) + "\n"


# Every result of docs/results/pqm, by one command: `pqm_experiments.py all [--dry-run]`.
ALL = [
    (".", ["--blast", "12", "--runs", "5", "--exps", "1,2,3"]),
    ("choke", ["--gateways", "red,choke", "--exps", "1", "--splits", "2", "--queue", "both",
               "--runs", "5", "--blast", "12"]),
    ("choke-legacy", ["--gateways", "red,choke", "--exps", "1", "--splits", "2", "--queue",
                      "both", "--runs", "3", "--blast", "12", "--tcp-legacy"]),
]


def run_all(argv):
    """Rebuild every CSV, PNG and table of docs/results/pqm (about 3 hours as root), each
    from the tree's commit (written into the CSVs and tables). --dry-run: the commands."""
    import subprocess
    base = REPO / "docs" / "results" / "pqm"
    for sub, extra in ALL:
        cmd = [sys.executable, str(Path(__file__).resolve()), *extra,
               "--out", str((base / sub).resolve())]
        print("+", " ".join(cmd), flush=True)
        if "--dry-run" not in argv:
            subprocess.run(cmd, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(REPO / "docs" / "results" / "pqm"))
    ap.add_argument("--gateways", default=",".join(GATEWAYS))
    ap.add_argument("--exps", default="1,2,3")
    ap.add_argument("--splits", default="2,4,6,8")
    ap.add_argument("--link", type=int, default=20)
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--blast", type=int, default=14)
    ap.add_argument("--cc", default="cubic")
    ap.add_argument("--tcp-legacy", action="store_true",
                    help="senders without RACK and tail-loss probes (net.ipv4.tcp_recovery=0, "
                         "tcp_early_retrans=0): loss recovery nearer the thesis' ns-2 TCP, "
                         "where a small window's losses end in a timeout")
    ap.add_argument("--runs", type=int, default=1, help="runs per cell (interleaved)")
    ap.add_argument("--queue", default="scaled",
                    help="scaled (94/31/62 at 20 Mbit/s), thesis (300/100/200), or both")
    ap.add_argument("--replot", action="store_true",
                    help="no runs: the table and PNG again from --out's pqm.csv")
    ap.add_argument("--merge", nargs="+", metavar="CSV",
                    help="no runs: the table and PNG of these CSVs' rows (a later file's "
                         "rows replace an earlier one's for the same gateway)")
    if sys.argv[1:2] == ["all"]:
        return run_all(sys.argv[2:])
    args = ap.parse_args()
    if args.replot:
        out = Path(args.out)
        rows = list(csv.DictReader(open(out / "pqm.csv")))
        for r in rows:
            for k in ("exp", "udp_flows", "link_mbit"):
                r[k] = int(r[k])
            r["tcp_share"] = float(r["tcp_share"])
        md = table(rows, rows[0]["link_mbit"])
        (out / "pqm.md").write_text(md)
        plot(rows, out, rows[0]["link_mbit"])
        print(md)
        return
    if args.merge:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        by = {}
        for f in args.merge:
            for r in csv.DictReader(open(f)):
                for k in ("exp", "udp_flows", "link_mbit"):
                    r[k] = int(r[k])
                r["tcp_share"] = float(r["tcp_share"])
                by[(r["gateway"], r["exp"], r["udp_flows"])] = r
        rows = sorted(by.values(), key=lambda r: (GATEWAYS.index(r["gateway"]), r["exp"],
                                                  r["udp_flows"]))
        write_rows(out / "pqm.csv", rows)
        md = table(rows, rows[0]["link_mbit"])
        (out / "pqm.md").write_text(md)
        plot(rows, out, rows[0]["link_mbit"])
        print(md)
        return
    if args.quick:
        args.gateways, args.exps, args.splits, args.warm, args.blast = "fifo,pqm,pqm-pb", "1", "2", 3, 7
    gws = args.gateways.split(",")
    bad = [g for g in gws if g not in GATEWAYS]
    if bad:
        sys.exit(f"unknown gateway(s) {bad}; choose from {GATEWAYS}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="weir-pqm-"))
    tb = weirtb.Testbed(lan=2, wan=2, gateway="linux-bridge", emu="wanemu",
                        paths=[PathSpec(delay=15), PathSpec(delay=15)])
    why = tb.check_prerequisites()
    if why:
        sys.exit("testbed unavailable: " + "; ".join(why))
    rows = []
    name = "pqm-quick" if args.quick else "pqm"
    commit = repo_commit()
    try:
        tb.claim().up()
        for h in tb.lan_hosts:
            tb.set_cc(h, args.cc)
            if args.tcp_legacy:
                weirtb.netns.sysctl(h, "net.ipv4.tcp_recovery", "0")
                weirtb.netns.sysctl(h, "net.ipv4.tcp_early_retrans", "0")
        queues = ["scaled", "thesis"] if args.queue == "both" else [args.queue]
        for qu, gw in [(qu, gw) for qu in queues for gw in gws]:
            if gw == "linux-htb":
                tb.start_gateway("linux-htb", htb_spec=htb_spec(args.link, qu))
            else:
                os.environ["WEIR_TESTBED_CFG"] = str(weir_cfg(d, gw, args.link, qu))
                tb.start_gateway("weir")
            for run in range(args.runs):
                for exp in [int(x) for x in args.exps.split(",")]:
                    for k in [int(x) for x in args.splits.split(",")]:
                        before = qm_snapshot(tb) if gw != "linux-htb" else {}
                        try:
                            r = run_one(tb, args.link, exp, k, args.warm, args.blast)
                        except Exception as e:  # one failed run must not lose the others
                            print(f"{gw} exp {exp} udp x{k}: FAILED {e}", flush=True)
                            continue
                        r.update({"gateway": gw, "exp": exp, "udp_flows": k,
                                  "cc": args.cc + ("-legacy" if args.tcp_legacy else ""),
                                  "link_mbit": args.link, "queue": qu, "run": run,
                                  "commit": commit})
                        if gw != "linux-htb":
                            r.update(qm_snapshot(tb))
                            for c in COUNTERS:  # this run's, not the gateway's since start
                                if isinstance(r.get(c), int) and isinstance(before.get(c), int):
                                    r[c] -= before[c]
                        rows.append(r)
                        write_csv(out / f"{name}.csv", rows)   # a cut-short run keeps its rows
                        print(f"{gw:>9} {qu} exp {exp} udp x{k} run {run}: TCP share "
                              f"{r['tcp_share']:.3f} ({r['tcp_mbit']:.2f} Mbit/s goodput, alone "
                              f"{r['tcp_alone_mbit']:.2f}), UDP {r['udp_mbit']:.2f} Mbit/s, "
                              f"retx {r['tcp_retx']}"
                              + (f", monitored {r.get('monitored')}, p {r.get('prob')}"
                                 if gw.startswith("pqm") else "")
                              + (f", choke drops {r.get('drops_choke')}, victims "
                                 f"{r.get('drops_victim')}, class drops {r.get('drops_class')}"
                                 if gw == "choke" else ""), flush=True)
            tb.stop_gateway()
    finally:
        tb.down()
    write_csv(out / f"{name}.csv", rows)
    md = table(rows, args.link)
    (out / f"{name}.md").write_text(md)
    if not args.quick:
        plot(rows, out, args.link)
    print("\n" + md)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Short transfers and lone bulk flows through weir, mode by mode, beside Linux HTB (issue 23).

Two measurements, each in the namespace testbed (scripts/weirtb) with one WAN host on a path of
a given RTT and one class each way at a given rate:

  fct    HTTP transfers: curl on LAN host l1 fetches files of each size from
         `python3 -m http.server` on WAN host w1, on an idle link and beside N bulk iperf3
         streams between l2 and w1 (downloading with -R, or uploading). Completion times
         (curl's time_total) per transfer.
  bulk   one (or N) bulk iperf3 flows alone in the class, upload and download: steady-state
         goodput (the run's second half) as a fraction of the class rate.

Usage (as root):
  scripts/fct.py fct  --modes pfq,postack,postack-paced,tcr,htb --rtt 40 --rate 20mbit \\
                      --sizes 100k,1m --bulk 0,4 --reps 5 --out docs/results/fct
  scripts/fct.py bulk --modes pfq,postack,tcr,htb --rtt 40 --rate 200mbit --flows 1 \\
                      --seconds 20 --out docs/results/fct
  scripts/fct.py fct --quick --out /tmp/fct   # CI: pfq and tcr, 100 KB, idle and beside 2

Writes OUT/fct.csv (or bulk.csv), OUT/fct.md (medians and p95) and, with matplotlib, OUT/fct.png.
"""
import argparse
import contextlib
import csv
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import traffic  # noqa: E402

HTTP_PORT = 8000
# TCP payload per byte weir charges a full frame: 1448 of 1514 + 24 (Ethernet header,
# preamble, FCS, gap: shaping.overhead). A class of R carries at most R x PAYLOAD of goodput.
PAYLOAD = 1448 / (1514 + 24)
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}


AQM = "codel"
SHAPING_EXTRA = ""      # --shaping: more settings of weir's `shaping` group


def weir_config(path, mode, rate):
    aqm = f'aqm = "{AQM}"; ' if AQM != "default" else ""    # "default": weir's own (older builds)
    path.write_text(weirtb.testbed_config_text(
        f'shaping = {{ mode = "{mode}"; outbound = "{rate}"; inbound = "{rate}"; {aqm}'
        f'{SHAPING_EXTRA} }};\n'))
    return path


def start_gateway(tb, mode, rate, cfg_dir):
    """weir in `mode`, or Linux HTB with a pfifo leaf ('htb')."""
    if mode == "htb":
        tb.start_gateway("linux-htb", htb_spec={"outbound": {"rate": rate},
                                                "inbound": {"rate": rate}})
        return
    os.environ["WEIR_TESTBED_CFG"] = str(weir_config(cfg_dir / f"{mode}.cfg", mode, rate))
    tb.start_gateway("weir")


def stop_gateway(tb):
    """Stop the gateway; weir must exit 0 (every mbuf back in its pool)."""
    rc = tb.stop_gateway()
    if rc not in (None, 0):
        raise SystemExit(f"weir exited {rc}: {tb.log_tail('weir')}")


TCP_BUF_MAX = 64 << 20   # bytes: a 200 Mbit/s x 150 ms BDP (3.75 MB) four times over, and more


@contextlib.contextmanager
def testbed(n_lan, rtt_ms):
    """The testbed with n_lan LAN hosts and one WAN host on a path of rtt_ms."""
    tb = weirtb.Testbed(lan=n_lan, wan=1, paths=[weirtb.PathSpec(delay=rtt_ms / 2)])
    why = tb.check_prerequisites()
    if why:
        raise SystemExit("testbed unavailable: " + "; ".join(why))
    with tb:
        tb.claim().up(wait=False)
        # A namespace's TCP buffers start at the kernel's defaults: at most 6 MB
        # to receive into, half of it window, which caps one flow at ~160 Mbit/s
        # on a 150 ms path behind any gateway (HTB read the same 157.6 as every
        # weir mode). Hosts on long fat paths raise it; so do these.
        for h in tb.lan_hosts + tb.wan_hosts:
            weirtb.netns.sysctl(h, "net.ipv4.tcp_rmem", f"4096 131072 {TCP_BUF_MAX}")
            weirtb.netns.sysctl(h, "net.ipv4.tcp_wmem", f"4096 16384 {TCP_BUF_MAX}")
        yield tb


def percentile(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


class Bulk:
    """N bulk iperf3 streams between l2 and w1 in the background."""

    def __init__(self, tb, n, reverse, seconds, warm=3.0):
        self.res = None
        self.warm = warm
        self.t = threading.Thread(target=self._run, args=(tb, n, reverse, seconds), daemon=True)

    def _run(self, tb, n, reverse, seconds):
        self.res = traffic.iperf_flows(tb, n=n, duration=seconds, reverse=reverse,
                                       pairs=[("l2", "w1")] * n, base_port=5301)

    def __enter__(self):
        self.t.start()
        time.sleep(self.warm)   # past slow start (and, with --warm, the young budgets)
        return self

    def __exit__(self, *exc):
        self.t.join()


def fetch(tb, size_name):
    addr = tb.addr("w1")
    out = tb.run("l1", ["curl", "-s", "-o", "/dev/null", "--max-time", "60", "-w",
                        "%{time_total} %{size_download} %{time_connect} %{time_starttransfer}",
                        f"http://{addr}:{HTTP_PORT}/{size_name}"], timeout=70)
    secs, got, conn, first = out.stdout.split()
    if int(got) != SIZES[size_name]:
        raise RuntimeError(f"fetched {got} of {SIZES[size_name]} bytes")
    # The handshake and the first byte apart from the transfer: a slow one
    # says where the time went (a SYN lost, a server not scheduled).
    return float(secs), float(conn), float(first)


def run_fct(args):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, bulk_rows = [], []
    with tempfile.TemporaryDirectory() as www, tempfile.TemporaryDirectory() as cfgs:
        for name in args.sizes:
            Path(www, name).write_bytes(os.urandom(SIZES[name]))
        with testbed(2, args.rtt) as tb:
            srv = tb.popen("w1", [sys.executable, "-m", "http.server", str(HTTP_PORT),
                                  "--directory", www])
            try:
                for mode in args.modes:
                    start_gateway(tb, mode, args.rate, Path(cfgs))
                    for n_bulk in args.bulk:
                        for bdir in (args.bulk_dirs if n_bulk else ["idle"]):
                            secs_bulk = int(args.warm) + 1 + args.reps * len(args.sizes) * 4
                            ctx = Bulk(tb, n_bulk, bdir == "down", secs_bulk,
                                       args.warm) if n_bulk else None
                            if ctx:
                                ctx.__enter__()
                            try:
                                for rep in range(args.reps):
                                    for name in args.sizes:
                                        t, conn, first = fetch(tb, name)
                                        rows.append(dict(mode=mode, rtt_ms=args.rtt, rate=args.rate,
                                                         bulk=n_bulk, bulk_dir=bdir, size=name,
                                                         rep=rep, seconds=round(t, 4),
                                                         connect_s=round(conn, 4),
                                                         first_byte_s=round(first, 4)))
                                        print(f"{mode:14s} bulk={n_bulk} {bdir:5s} {name:5s} "
                                              f"{t * 1000:8.1f} ms", flush=True)
                            finally:
                                if ctx:
                                    ctx.__exit__(None, None, None)
                            if ctx:
                                bulk_rows.append(bulk_share(ctx.res, mode, n_bulk, bdir, args))
                    stop_gateway(tb)
            finally:
                srv.kill()
                srv.communicate()
    write_csv(out / "fct.csv", rows)
    write_csv(out / "fct-bulk.csv", bulk_rows)
    table = fct_table(rows, args) + bulk_table(bulk_rows, args)
    (out / "fct.md").write_text(table)
    print(table)
    plot_fct(out / "fct.png", rows)


def bulk_share(res, mode, n_bulk, bdir, args):
    """What the bulk streams got while the transfers ran (item 3: their Jain index must not
    change): goodput per stream over the whole run, warm-up included."""
    gp = [r.goodput_bps / 1e6 for r in (res or [])]
    return dict(mode=mode, rtt_ms=args.rtt, rate=args.rate, bulk=n_bulk, bulk_dir=bdir,
                streams=len(gp), total_mbit=round(sum(gp), 3),
                min_mbit=round(min(gp), 3) if gp else 0.0,
                max_mbit=round(max(gp), 3) if gp else 0.0,
                jain=round(traffic.jain(gp), 4))


def bulk_table(bulk_rows, args):
    if not bulk_rows:
        return ""
    lines = ["", "The bulk streams beside them, over their whole run: total goodput "
             "(Mbit/s), slowest and fastest stream, Jain's index.", "",
             "| mode | bulk | total | min | max | Jain |", "|---|---|---|---|---|---|"]
    for r in bulk_rows:
        lines.append(f"| {r['mode']} | {r['bulk']} {r['bulk_dir']} | {r['total_mbit']:.2f} | "
                     f"{r['min_mbit']:.3f} | {r['max_mbit']:.3f} | {r['jain']:.4f} |")
    return "\n".join(lines) + "\n"


def fct_table(rows, args):
    cols = []
    for n_bulk in args.bulk:
        for bdir in (args.bulk_dirs if n_bulk else ["idle"]):
            for name in args.sizes:
                cols.append((n_bulk, bdir, name))
    head = "| mode | " + " | ".join(
        f"{'idle' if b == 0 else f'{b} bulk {d}'}: {s}" for b, d, s in cols) + " |"
    lines = [f"Completion times, median (p95) in ms; {args.rate} each way, {args.rtt} ms RTT, "
             f"{args.reps} transfers per cell.", "", head, "|---" * (len(cols) + 1) + "|"]
    for mode in args.modes:
        cells = []
        for b, d, s in cols:
            xs = [r["seconds"] * 1000 for r in rows if r["mode"] == mode and r["bulk"] == b
                  and r["bulk_dir"] == d and r["size"] == s]
            cells.append(f"{statistics.median(xs):.0f} ({percentile(xs, 95):.0f})" if xs else "")
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_fct(path, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    keys = sorted({(r["bulk"], r["bulk_dir"], r["size"]) for r in rows})
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(keys)), 4))
    w = 0.8 / max(len(modes), 1)
    for i, m in enumerate(modes):
        med = []
        for k in keys:
            xs = [r["seconds"] * 1000 for r in rows if (r["bulk"], r["bulk_dir"], r["size"]) == k
                  and r["mode"] == m]
            med.append(statistics.median(xs) if xs else 0)
        ax.bar([j + i * w for j in range(len(keys))], med, w, label=m)
    ax.set_xticks([j + 0.4 - w / 2 for j in range(len(keys))])
    ax.set_xticklabels([f"{'idle' if b == 0 else f'{b} {d}'}\n{s}" for b, d, s in keys])
    ax.set_ylabel("completion time, median (ms)")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run_bulk(args):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    rate_bps = parse_rate(args.rate)
    with tempfile.TemporaryDirectory() as cfgs:
        with testbed(1, args.rtt) as tb:
            for mode in args.modes:
                start_gateway(tb, mode, args.rate, Path(cfgs))
                for cc in args.cc:
                    for reverse in (False, True):
                        flows = traffic.iperf_flows(tb, n=args.flows, duration=args.seconds,
                                                    reverse=reverse, cc=cc,
                                                    pairs=[("l1", "w1")] * args.flows)
                        errs = [f.error for f in flows if f.error]
                        half = args.seconds // 2
                        bps = sum(traffic.steady_bps(f.interval_bps, half)
                                  for f in flows) if not errs else float("nan")
                        # The senders' smoothed RTT (iperf3's mean over the run, Linux):
                        # what a queue standing at the gateway adds to the path (item 4).
                        rtts = [f.mean_rtt_ms for f in flows if f.mean_rtt_ms is not None]
                        row = dict(mode=mode, rtt_ms=args.rtt, rate=args.rate, flows=args.flows,
                                   cc=cc, direction="download" if reverse else "upload",
                                   mbps=round(bps / 1e6, 2), of_class=round(bps / rate_bps, 3),
                                   of_payload=round(bps / (rate_bps * PAYLOAD), 3),
                                   srtt_ms=round(statistics.median(rtts), 1) if rtts else "",
                                   errors=len(errs))
                        rows.append(row)
                        print(row, flush=True)
                stop_gateway(tb)
    write_csv(out / "bulk.csv", rows)
    lines = [f"Steady goodput (second half of {args.seconds} s) of {args.flows} flow(s) alone in a "
             f"{args.rate} class, {args.rtt} ms RTT, as a fraction of the payload the class "
             f"carries at most ({PAYLOAD:.3f} of its rate); in brackets its Mbit/s and the "
             f"senders' median smoothed RTT.", "",
             "| mode | cc | upload | download |", "|---|---|---|---|"]
    for mode in args.modes:
        for cc in args.cc:
            up = [r for r in rows if r["mode"] == mode and r["cc"] == cc and r["direction"] == "upload"]
            dn = [r for r in rows if r["mode"] == mode and r["cc"] == cc and r["direction"] == "download"]
            cells = [f"{r[0]['of_payload']} ({r[0]['mbps']} Mbit/s, "
                     f"{r[0]['srtt_ms'] or '?'} ms)" if r else "" for r in (up, dn)]
            lines.append(f"| {mode} | {cc} | {cells[0]} | {cells[1]} |")
    table = "\n".join(lines) + "\n"
    (out / "bulk.md").write_text(table)
    print(table)


def parse_rate(s):
    s = s.lower()
    for suf, mul in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1)):
        if s.endswith(suf):
            return float(s[: -len(suf)]) * mul
    return float(s)


def write_csv(path, rows):
    if not rows:
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["fct", "bulk"])
    ap.add_argument("--modes", default="pfq,postack,postack-paced,tcr,htb")
    ap.add_argument("--rtt", type=float, default=40.0, help="path RTT, ms")
    ap.add_argument("--rate", default=None, help="class rate each way (fct: 20mbit, bulk: 200mbit)")
    ap.add_argument("--sizes", default="100k,1m")
    ap.add_argument("--bulk", default="0,4", help="bulk stream counts beside the transfers")
    ap.add_argument("--bulk-dirs", default="down,up")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warm", type=float, default=3.0,
                    help="fct: seconds the bulk flows run before the first transfer (3: past "
                         "slow start; many flows at a small share stay young, within "
                         "shaping.young_bytes, for longer)")
    ap.add_argument("--flows", type=int, default=1, help="bulk: flows")
    ap.add_argument("--cc", default="cubic", help="bulk: congestion controls, comma-separated")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--aqm", default="codel", choices=["codel", "none", "default"],
                    help="shaping.aqm for weir's pfq and tcr leaves")
    ap.add_argument("--shaping", default="",
                    help="more settings of weir's shaping group, e.g. 'ipabr = { headroom_us = 0; };'")
    ap.add_argument("--quick", action="store_true", help="a short run that checks the script works")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    args.modes = args.modes.split(",")
    args.sizes = args.sizes.split(",")
    args.bulk = [int(x) for x in args.bulk.split(",")]
    args.bulk_dirs = args.bulk_dirs.split(",")
    args.cc = args.cc.split(",")
    global AQM, SHAPING_EXTRA
    AQM, SHAPING_EXTRA = args.aqm, args.shaping
    if args.quick:
        args.modes, args.sizes, args.reps = ["pfq", "tcr"], ["100k"], 2
        args.bulk, args.bulk_dirs, args.seconds = [0, 2], ["down"], 6
        args.warm = 1.0
    if args.rate is None:
        args.rate = "20mbit" if args.what == "fct" else "200mbit"
    if os.geteuid() != 0:
        raise SystemExit("run as root (network namespaces)")
    (run_fct if args.what == "fct" else run_bulk)(args)


if __name__ == "__main__":
    main()

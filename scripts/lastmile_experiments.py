#!/usr/bin/python3
"""The seed thesis' slow-link and long-thin-network test bed (002, Sec. 3.3) in the namespace
testbed, with weir as the 1.5 Mbit/s shared link, and weir's last_mile clamp and fairness
exemption on and off (issue 22, docs/lastmile.md).

Topology (one run): LAN hosts l1, l2 send to WAN hosts w1 (RTT 200 ms, the thesis' src1-sink1)
and w2 (RTT 120 ms, src2-sink2), fast, and l1 sends to w3, whose path is the last hop: a
wanemu path with its own rate, delay and drop-tail buffer (limit=), and w3's MTU 296 B
(MSS 256). weir shapes outbound to 1.5 Mbit/s (one class, postack: weir's own per-flow
fairness). Two setups, separate runs:
  slow  56 kbit/s, 125 ms one way (the thesis' 75 ms PPP hop plus its 50 ms delay box:
        RTT ~350 ms under load)
  ltn   9.6 kbit/s, 320 ms one way (with 258 ms to serialise a 296 B packet: RTT ~0.9-1 s,
        the thesis' "around 900 ms")
Last-hop buffer 3, 10 or 20 packets (wanemu limit=, which counts the frame being serialised:
the hop queues limit - 1 behind it, so weir's last_mile is told buffer = limit - 1).
Variants of weir per run:
  plain         no last mile: the slow flow is one of the class's flows like any other
  clamp         last_mile on the slow host (rate, rtt, buffer): window <= pipe + buffer
  clamp+exempt  the same and exempt from weir's per-flow fairness (no PostACK holding,
                not counted in the class's share)
  exempt        the exemption alone: the clamp told a buffer of 10,000 packets, so it never
                binds (its `windows clamped` stays 0)
  clamp1k       the thesis' Table 3.10 window of ~1 KB: the clamp told rtt 1 ms and buffer 4,
                i.e. 4 segments of MSS 256 - 12 = 976 bytes, not exempt
Senders use reno (the thesis' "standard" policy; see docs/results/lastmile/README.md for what
does not carry over from its IBK/CR/CANIT senders).

Per run: the slow flow's goodput (iperf3, at the receiver), its losses at the last hop (the
wanemu path's drop-tail drops over frames offered, %), TCP retransmissions, mean RTT (the
sender's smoothed RTT), the fast flows' goodput, and weir's last_mile counters.

Usage (as root):
  scripts/lastmile_experiments.py --out docs/results/lastmile                 # ~15 min
  scripts/lastmile_experiments.py --quick --out /tmp/lm                       # CI, < 60 s
Writes OUT/lastmile.csv, OUT/lastmile.md (with the thesis' tables beside) and OUT/lastmile.png.
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb.experiment import write_csv  # noqa: E402

SETUPS = {
    # rate of the last hop, one-way delay of w3's path (ms), last_mile rtt (ms)
    # last_mile rtt: the path's round trip without queueing (2 x delay, one 296 B frame
    # and one ACK serialised at the last hop's rate)
    "slow": {"rate": "56kbit", "bps": 56000, "delay": 125, "rtt": 310},
    "ltn": {"rate": "9600bit", "bps": 9600, "delay": 320, "rtt": 960},
}
VARIANTS = ["plain", "clamp", "clamp+exempt", "exempt", "clamp1k"]
# variant: (told rtt in ms or None for the setup's, told buffer or None for the hop's - 1, exempt)
LM = {"clamp": (None, None, False), "clamp+exempt": (None, None, True),
      "exempt": (None, 10000, True), "clamp1k": (1, 4, False)}
SHARED = "1500kbit"
MTU = 296

# The thesis' test-bed figures (Tables 3.7-3.13), "standard" policy unless named; goodput as
# printed there ("Kbps"), loss in %.
THESIS = """\
| thesis table | slow link | LTN |
|---|---|---|
| 3.7 standard, goodput / loss | 8.08 / 6.2 % | 5.64 / 3.8 % |
| 3.7 IBK, CANIT, CR goodput | 7.32, 6.92, 4.98 | 5.25, 2.65, 2.56 |
| 3.8/3.9 standard, buffer 3 / 10 / 20 | 8.08 / 31.35 / 37.85 | 5.64 / 5.91 / 6.04 |
| 3.8 avg RTT, buffer 3 / 10 / 20 | 659.7 / 686.2 / 855.7 ms | - |
| 3.10/3.11 standard, rwnd 1 KB vs 8 KB goodput | 10.05 vs 8.08 | 4.41 vs 5.64 |
| 3.10/3.11 standard, rwnd 1 KB vs 8 KB loss | 1.6 vs 6.2 % | 0.2 vs 3.6 % |
| 3.12/3.13 policies off for the slow connection (IBK, CANIT, CR) | 7.34->7.96, 6.92->7.96, 4.98->8.48 | 5.25->5.72, 2.65->5.76, 2.56->5.11 |
"""


def weir_config(path, setup, variant, buffer, w3):
    s = SETUPS[setup]
    lm = ""
    if variant != "plain":
        rtt, told, exempt = LM[variant]
        # wanemu's limit counts the frame on the wire too: the hop queues limit - 1.
        told = buffer - 1 if told is None else told
        lm = (f' last_mile = {{ rate = "{s["rate"]}"; rtt = {rtt or s["rtt"]}; buffer = {told}; '
              f'exempt = {"true" if exempt else "false"}; side = "wan"; }};')
    body = (f'shaping = {{\n  outbound = {{ rate = "{SHARED}"; default = "shared";\n'
            f'    classes = ( {{ name = "shared"; rate = "{SHARED}"; mode = "postack"; }} ); }};\n'
            f'  inbound = "{SHARED}";\n}};\n')
    if lm:
        body += f'rules = ( {{ class = "shared"; wan = "{w3}/32";{lm} }} );\n'
    path.write_text(weirtb.testbed_config_text(body))
    return path


def path_counters(tb):
    st = tb.wanemu_stats()
    return {name: p["to_path"] for name, p in st["paths"].items()}


def run_one(tb, setup, variant, buffer, seconds, cfg_dir, cc, rep=0):
    w3 = tb.addr("w3")
    os.environ["WEIR_TESTBED_CFG"] = str(weir_config(cfg_dir / f"{setup}-{variant}-{buffer}.cfg",
                                                     setup, variant, buffer, w3))
    tb.start_gateway("weir")
    before = path_counters(tb)
    flows = tb.iperf(pairs=[("l1", "w1"), ("l2", "w2"), ("l1", "w3")], duration=seconds, cc=cc)
    time.sleep(1.2)     # weir writes its stats every second
    after = path_counters(tb)
    stats = tb.weir_stats()
    slow_path = sorted(after)[2]    # the third path is w3's
    rx = after[slow_path]["rx"] - before[slow_path]["rx"]
    dropped = after[slow_path]["dropped_queue"] - before[slow_path]["dropped_queue"]
    slow, f1, f2 = flows[2], flows[0], flows[1]
    for f in flows:
        if f.error:
            raise RuntimeError(f"{setup}/{variant}/{buffer}: flow {f.flow}: {f.error}")
    lm = stats["ports"]["wan"].get("last_mile", {})
    lm_out = stats["ports"]["lan"].get("last_mile", {})
    return {
        "setup": setup, "buffer": buffer, "variant": variant, "rep": rep, "seconds": seconds,
        "cc": cc,
        "slow_goodput_kbps": round(slow.goodput_bps / 1e3, 2),
        "slow_loss_pct": round(100.0 * dropped / rx, 2) if rx else 0.0,
        "slow_lasthop_drops": dropped,
        "slow_retransmits": slow.retransmits,
        "slow_rtt_ms": round(slow.mean_rtt_ms, 1) if slow.mean_rtt_ms else "",
        "fast1_mbps": round(f1.goodput_bps / 1e6, 3),
        "fast2_mbps": round(f2.goodput_bps / 1e6, 3),
        "lm_clamped": lm.get("clamped", 0) + lm_out.get("clamped", 0),
        "lm_exempt": lm.get("exempt", 0) + lm_out.get("exempt", 0),
        "weir_dropped": stats["ports"]["lan"]["dropped"],
    }


def summary(rows):
    """Median (lowest-highest, runs) of goodput and loss per cell."""
    cells = {}
    for r in rows:
        cells.setdefault((r["setup"], r["buffer"], r["variant"]), []).append(r)
    out = ["| setup | buffer | variant | slow goodput kbit/s | last-hop loss % | windows clamped |",
           "|---|---|---|---|---|---|"]

    def mr(v):
        return f"{median(v):g} ({min(v):g}-{max(v):g}, {len(v)})"
    for (setup, buffer, variant), rs in cells.items():
        out.append(f"| {setup} | {buffer} | {variant} | {mr([x['slow_goodput_kbps'] for x in rs])} | "
                   f"{mr([x['slow_loss_pct'] for x in rs])} | {mr([x['lm_clamped'] for x in rs])} |")
    return "\n".join(out) + "\n"


def table(rows):
    out = ["| setup | buffer | variant | slow goodput kbit/s | last-hop loss % | retransmits | "
           "slow RTT ms | fast flows Mbit/s | windows clamped |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['setup']} | {r['buffer']} | {r['variant']} | {r['slow_goodput_kbps']} | "
                   f"{r['slow_loss_pct']} | {r['slow_retransmits']} | {r['slow_rtt_ms']} | "
                   f"{r['fast1_mbps']} + {r['fast2_mbps']} | {r['lm_clamped']} |")
    return "\n".join(out) + "\n"


def plot(rows, png):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no PNG")
        return
    setups = [s for s in SETUPS if any(r["setup"] == s for r in rows)]
    fig, axes = plt.subplots(2, len(setups), figsize=(5.5 * len(setups), 7), squeeze=False)
    for j, s in enumerate(setups):
        rs = [r for r in rows if r["setup"] == s]
        bufs = sorted({r["buffer"] for r in rs})
        variants = [v for v in VARIANTS if any(r["variant"] == v for r in rs)]
        width = 0.8 / len(variants)
        for k, v in enumerate(variants):
            xs = [i + k * width for i in range(len(bufs))]
            for row, key in ((0, "slow_goodput_kbps"), (1, "slow_loss_pct")):
                vals = [[r[key] for r in rs if r["buffer"] == b and r["variant"] == v] for b in bufs]
                med = [median(x) if x else 0 for x in vals]
                err = [[m - min(x) if x else 0 for m, x in zip(med, vals)],
                       [max(x) - m if x else 0 for m, x in zip(med, vals)]]
                axes[row][j].bar(xs, med, width, yerr=err, capsize=2, label=v)
        for ax, what in ((axes[0][j], "slow flow goodput, kbit/s"), (axes[1][j], "last-hop loss, %")):
            ax.set_xticks([i + 0.4 - width / 2 for i in range(len(bufs))])
            ax.set_xticklabels([f"buffer {b}" for b in bufs])
            ax.set_title(f"{s}: {what}")
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--setups", default="slow,ltn")
    ap.add_argument("--buffers", default="3,10,20")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--seconds", type=int, default=45)
    ap.add_argument("--cc", default="reno")
    ap.add_argument("--reps", type=int, default=1, help="runs per cell (variants alternate)")
    ap.add_argument("--quick", action="store_true",
                    help="CI: slow link, buffer 3, plain, clamp1k and clamp+exempt, 8 s each")
    args = ap.parse_args()
    if args.quick:
        args.setups, args.buffers, args.variants, args.seconds = "slow", "3", "plain,clamp1k,clamp+exempt", 8
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as cfgs:
        for setup in args.setups.split(","):
            s = SETUPS[setup]
            for buffer in [int(b) for b in args.buffers.split(",")]:
                paths = [weirtb.PathSpec(delay=100), weirtb.PathSpec(delay=60),
                         weirtb.PathSpec(delay=s["delay"], rate=s["rate"], limit=buffer)]
                tb = weirtb.Testbed(lan=2, wan=3, paths=paths)
                why = tb.check_prerequisites()
                if why:
                    sys.exit("testbed unavailable: " + "; ".join(why))
                try:
                    tb.claim().up(wait=False)
                    tb.run("w3", f"ip link set eth0 mtu {MTU}")
                    for rep in range(args.reps):
                        for variant in args.variants.split(","):
                            r = run_one(tb, setup, variant, buffer, args.seconds, Path(cfgs),
                                        args.cc, rep)
                            print(r, flush=True)
                            rows.append(r)
                finally:
                    tb.down()
    write_csv(out / "lastmile.csv", rows)
    md = ("# Slow last miles through weir (seed 002, Sec. 3.3)\n\n"
          f"`scripts/lastmile_experiments.py {' '.join(sys.argv[1:])}`; {args.seconds} s per run, "
          f"senders {args.cc}, shared link {SHARED}, MTU {MTU} on the slow host.\n\n"
          + summary(rows) + "\n## Every run\n\n" + table(rows)
          + "\n## The thesis' test-bed tables\n\n" + THESIS)
    (out / "lastmile.md").write_text(md)
    plot(rows, out / "lastmile.png")
    print(md)


if __name__ == "__main__":
    main()

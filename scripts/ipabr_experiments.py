#!/usr/bin/python3
"""Reproduce IP-ABR's experiments (seed 000, chapter 7) with real Linux TCP in the testbed.

    scripts/ipabr_experiments.py droptail|weighted|variation|cbr|sws|all|report
                                 [--quick] [--secs S] [--modes a,b] [--out DIR]
                                 [--sws-mss 256,536,...] [--sws-rtts 910,...] [--flows N]

The satellite case: a 1.536 Mbit/s bottleneck with 450 ms one way each direction (the
emulator's path: rate, delay and a drop-tail queue of 15 or 30 packets), 32 bulk TCP
flows (cubic, MSS 1460) from two LAN hosts to one WAN host. Each case runs weir with one
experiment class ("exp") in the modes compared, and Linux HTB (pfifo leaf, the same queue
limit) in weir's place:

  ipabr, postack, tcr, pfq   weir's class at the bottleneck's rate (weir is the bottleneck)
  tcp                        weir's class at 20 Mbit/s: plain TCP at the emulator's
                             drop-tail queue, the thesis' "TCP" column
  htb                        Linux HTB at the bottleneck's rate, pfifo of the same limit

Measured per run: every flow's goodput at the receiver over a 5 s running window (iperf3's
per-second receiver reports, averaged five at a time), its mean and standard deviation from
`--skip` s on; the total the receivers got from `--skip` s to the end, every flow, its
client finished or not (a client that never reported is read from its server), beside
what the class carried on the wire over the same span; ESDL (Eq. 7.2) of every data segment from a capture at the senders: time
from a segment's first transmission to the first ACK covering it, less the path's round
trip (900 ms); the share of segments whose ESDL reaches the queue's drain time (Eq. 7.3:
117 ms at 15 packets, 234 ms at 30); drops at weir and at the emulator.

Cases: droptail (queue 15 and 30: Tables 7.3-7.8, Fig. 7.18), weighted (1:2:4:8 in four
groups of 8, queue 30: Fig. 7.19), variation (the link switching between 192000 and 64000
B/s every 20 s, queue 30: Sec. 7.5; weir's link rate follows the emulator's through a
policy reload, as a BMS would), cbr (a 512 kbit/s UDP class of higher priority starting
half way: Sec. 5.2, Eq. 4.3), sws (the silly-window credit, Secs. 5.3-5.4: 64 flows over
weir's ipabr class at 1.536 Mbit/s, one WAN host per round trip 910-1100 ms, MSS 256, 536,
1024 and 1452, shaping.ipabr.sws_credit on and off, 100 s: per-flow utilisation; writes
sws.csv, sws_flows.csv, sws.png). Writes DIR/<case>.csv, DIR/<case>_series.csv, PNGs and
DIR/README-table.md (`report` rewrites only the table). --quick: one short run per mode
on a short path (CI checks that the script works; its numbers mean nothing).
"""
import argparse
import csv
import json
import os
import signal
import statistics
import struct
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.experiment import repo_commit  # noqa: E402
import paper_experiments as pe  # noqa: E402

COMMIT = repo_commit()
STAGGER = (8, 0.5)          # seed 000 starts 8 flows every 0.5 s (Sec. 5.2.2)
LINK_BPS = 1536000
DELAY_MS = 450
FLOWS = 32
SENDER_CC = "cubic"
CPORT = pe.CPORT
STATS_INTERVAL = 0.5
CAPDIR = Path("/tmp/ipabr-captures")     # the senders' captures, kept (not committed)
# What the thesis reports (Tables 7.3-7.8, 7.11); None where it gives no figure.
# One randomly chosen flow's goodput mean and std (Tables 7.3, 7.5), segments with ESDL
# >= 117 ms and >= the queue's drain time (Tables 7.4, 7.6), one flow's ESDL mean and std
# (Table 7.7) and the largest ESDL (Table 7.8).
THESIS = {
    15: {"tcp": {"mean_kbps": 66.56, "std_kbps": 25.09, "over117_pct": 6.9},
         "ipabr": {"mean_kbps": 48.50, "std_kbps": 2.258, "over117_pct": 0.5}},
    30: {"tcp": {"mean_kbps": 49.67, "std_kbps": 25.16, "over117_pct": 12.0,
                 "over_drain_pct": 6.7, "esdl_mean_ms": 134, "esdl_std_ms": 1137,
                 "esdl_max_ms": 7921},
         "ipabr": {"mean_kbps": 49.19, "std_kbps": 2.6, "over117_pct": 0.07,
                   "over_drain_pct": 0.0, "esdl_mean_ms": 30.9, "esdl_std_ms": 19.7,
                   "esdl_max_ms": 230}},
}


# ----- weir's and HTB's configuration ---------------------------------------------------
def weir_config(path, mode, link_bps, limit=0, weights=None, cbr=False, base=CPORT, n=FLOWS):
    """The testbed config: a root of link_bps, "exp" (the bulk flows' data connections,
    cports base..base+n-1) in `mode`, "ctl" for iperf3's control connections (lowest
    priority, a sliver), and with cbr a prio-0 class "cbr" for UDP to port 7000.
    weights: a weight per flow (rules by cport)."""
    base_cfg = weirtb.testbed_config_text(stats_interval=STATS_INTERVAL).replace(
        "other = 30;", "other = 2;")
    exp_rate = "20mbit" if mode == "tcp" else f"{link_bps}"
    root = 20_064_000 if mode == "tcp" else link_bps
    wmode = "pfq" if mode == "tcp" else mode
    classes = []
    if cbr:
        classes.append(f'{{ name = "cbr"; rate = "768kbit"; ceil = "{root}"; prio = 0; '
                       f'mode = "pfq"; }}')
        exp = (f'{{ name = "exp"; rate = "64kbit"; ceil = "{root if mode == "tcp" else link_bps}"; '
               f'prio = 1; mode = "{wmode}"; }}')
    else:
        exp = (f'{{ name = "exp"; rate = "{exp_rate}"; ceil = "{exp_rate}"; prio = 1; '
               f'mode = "{wmode}"; }}')
    classes.append(exp)
    # iperf3's control connections: a sliver, the last to borrow, up to the link (their
    # results come back over them at the end, 32 JSON reports).
    classes.append(f'{{ name = "ctl"; rate = "16kbit"; ceil = "{root}"; prio = 2; mode = "pfq"; }}')
    rules = []
    if weights:
        for i, w in enumerate(weights):
            rules.append(f'{{ class = "exp"; proto = "tcp"; lan_port = "{base + i}"; '
                         f'weight = {w}; }}')
    else:
        rules.append(f'{{ class = "exp"; proto = "tcp"; lan_port = "{CPORT}-{CPORT + 99}"; }}')
    if cbr:
        rules.append('{ class = "cbr"; proto = "udp"; wan_port = "7000"; }')
    lim = f"limit = {limit}; " if limit else ""
    path.write_text(base_cfg + f"""shaping = {{
  {lim}outbound = {{
    rate = "{root}";
    default = "ctl";
    classes = (
      {(","+chr(10)+"      ").join(classes)}
    );
  }};
}};
rules = (
  {("," + chr(10) + "  ").join(rules)}
);
""")
    return path


def htb_spec(link_bps, limit, cbr=False):
    # HTB counts a frame as the socket sees it (1514 bytes), the emulator and weir add the
    # 24 bytes of preamble, FCS and gap: the same wire rate is 1514/1538 of it in HTB's terms.
    # At 98 % of it HTB is the one bottleneck: at the emulator's very rate its bursts
    # also filled the emulator's queue, two drop-tail queues in a row (median ESDL 220 ms
    # with 15 packets each).
    link_bps = link_bps * 1514 // 1538 * 98 // 100
    classes = []
    if cbr:
        classes.append({"name": "cbr", "rate": "768kbit", "ceil": f"{link_bps}bit", "prio": 0,
                        "wan_ports": [7000, 7000]})
    classes.append({"name": "exp", "rate": "64kbit" if cbr else f"{link_bps}bit",
                    "ceil": f"{link_bps}bit", "prio": 1, "lan_ports": [CPORT, CPORT + 99]})
    classes.append({"name": "ctl", "rate": "16kbit", "ceil": f"{link_bps}bit", "prio": 2})
    return {"outbound": {"rate": f"{link_bps}bit", "default": "ctl", "classes": classes},
            "limit": limit or 1000}


# ----- ESDL from a capture at the senders -----------------------------------------------
def read_pcap(path):
    """(time, src port, dst port, seq, ack, payload length, flags, SACK blocks) of every
    IPv4 TCP frame of a classic pcap (Ethernet); SACK blocks as far as captured."""
    out = []
    data = Path(path).read_bytes() if Path(path).exists() else b""
    if len(data) < 24:
        return out
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xa1b2c3d4, 0xa1b23c4d) else ">"
    nano = magic == 0xa1b23c4d
    off = 24
    while off + 16 <= len(data):
        ts, tf, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        frame = data[off:off + incl]
        off += incl
        if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
            continue
        ihl = (frame[14] & 0x0f) * 4
        tot = struct.unpack(">H", frame[16:18])[0]
        t = 14 + ihl
        sp, dp, seq, ack, doff_flags = struct.unpack(">HHIIH", frame[t:t + 14])
        doff = (doff_flags >> 12) * 4
        sacks, o, opt_end = [], t + 20, min(t + doff, len(frame))
        while o < opt_end:
            kind = frame[o]
            if kind == 0:
                break
            if kind == 1:
                o += 1
                continue
            if o + 1 >= opt_end:
                break
            ln = frame[o + 1]
            if ln < 2:
                break
            if kind == 5:
                for b in range(o + 2, min(o + ln, opt_end) - 7, 8):
                    sacks.append(struct.unpack(">II", frame[b:b + 8]))
            o += ln
        out.append((ts + tf / (1e9 if nano else 1e6), sp, dp, seq, ack, tot - ihl - doff,
                    doff_flags & 0x3f, sacks))
    return out


def esdl(frames, rtt_s, first_port=CPORT, last_port=CPORT + 99):
    """ESDL (s) of every data segment of the flows from LAN ports first..last (Eq. 7.2):
    from its first transmission to the first ACK that reports it received, less rtt_s.
    Two readings: `sack` takes an ACK whose SACK blocks cover the segment (the receiver
    has it: "delivered to the destination"), `cum` only the cumulative ACK (in order:
    what the application can read). Returns (sack list of (t, esdl), cum list, segments
    sent again)."""
    import bisect
    flows = {}
    res, cum, retx = [], [], 0
    for t, sp, dp, seq, ack, plen, flags, sacks in frames:
        if first_port <= sp <= last_port and plen > 0:
            f = flows.setdefault(sp, {"base": (seq - 1) & 0xffffffff, "max": 0, "start": [],
                                      "seg": [], "i": 0})
            a = (seq - f["base"]) & 0xffffffff
            end = a + plen
            if end <= f["max"]:
                retx += 1       # not past what was sent: a retransmission
                continue
            f["max"] = end
            f["start"].append(a)
            f["seg"].append([a, end, t, False])
        elif first_port <= dp <= last_port and flags & 0x10:
            f = flows.get(dp)
            if f is None:
                continue
            for left, right in sacks:
                lo, hi = (left - f["base"]) & 0xffffffff, (right - f["base"]) & 0xffffffff
                if hi <= lo or hi > f["max"]:
                    continue
                k = bisect.bisect_left(f["start"], lo)
                while k < len(f["seg"]) and f["seg"][k][1] <= hi:
                    sg = f["seg"][k]
                    if not sg[3]:
                        sg[3] = True
                        res.append((sg[2], t - sg[2] - rtt_s))
                    k += 1
            a = (ack - f["base"]) & 0xffffffff
            if a > f["max"] + (1 << 30):
                continue        # below the first data: the handshake's
            q, i = f["seg"], f["i"]
            while i < len(q) and q[i][1] <= a:
                if not q[i][3]:
                    q[i][3] = True
                    res.append((q[i][2], t - q[i][2] - rtt_s))
                cum.append((q[i][2], t - q[i][2] - rtt_s))
                i += 1
            f["i"] = i
    res.sort()
    return res, cum, retx


class Capture:
    """tcpdump on the senders' eth0 (headers only) for the run."""

    def __init__(self, tb, hosts, d, tag):
        self.tb, self.hosts, self.d, self.p, self.tag = tb, hosts, d, [], tag

    def __enter__(self):
        for h in self.hosts:
            f = self.d / f"cap-{self.tag}-{h}.pcap"
            if f.exists():
                f.unlink()
            self.p.append((f, self.tb.popen(h, ["tcpdump", "-i", "eth0", "-s", "100", "-U", "-w",
                                                str(f), "tcp and portrange 6000-6099"])))
        time.sleep(1.0)
        return self

    def __exit__(self, *exc):
        for _, p in self.p:
            p.send_signal(signal.SIGINT)
        for _, p in self.p:
            try:
                p.communicate(timeout=10)
            except Exception:  # noqa: BLE001
                p.kill()
                p.communicate()

    def frames(self):
        out = []
        for f, _ in self.p:
            out += read_pcap(f)
        out.sort()
        return out


# ----- one run ------------------------------------------------------------------------
def running(series, width=5):
    """Five-second running mean of a per-second series."""
    return [statistics.mean(series[i - width + 1:i + 1]) for i in range(width - 1, len(series))]


def emu_drops(tb):
    try:
        st = tb.wanemu_stats()
    except Exception:  # noqa: BLE001
        return 0
    return sum(p["to_path"].get("dropped_queue", 0) for p in st["paths"].values())


def weir_drops(tb):
    c = tb.weir_stats()["shaping"]["outbound"]["classes"]["exp"]
    return c["drops_flow"] + c["drops_class"] + c.get("drops_aqm", 0)


def exp_counters(htb_exp):
    """The "exp" class's counters for pe.Sampler: (time, queued, bytes, ACKs held, drops),
    from weir's stats file or HTB's leaf."""
    def get(tb):
        if tb.gateway_running == "linux-htb":
            q = weirtb.htb.leaf_stats("outbound").get(htb_exp, {})
            return time.time(), q.get("qlen", 0), q.get("bytes", 0), 0, q.get("drops", 0)
        st = tb.weir_stats()
        c = st["shaping"]["outbound"]["classes"]["exp"]
        return (st["uptime_s"], c["queued_pkts"], c["bytes"], 0,
                c["drops_flow"] + c["drops_class"])
    return get


def fill_from_rx(flows, rx, ports, t0, secs):
    """A flow iperf3 reported nothing for (neither its client nor its server) takes the
    per-second series its receiver's kernel counted (pe.RxBytes)."""
    for f, port in zip(flows, ports):
        if len(f.interval_bps) < secs // 2 and rx.rows:
            f.interval_bps, f.rx_source = rx.series(port, t0, secs), "kernel"


def rx_total(flows, rx, ports, t0, skip, secs):
    """What the receivers got from skip s to secs s (bit/s), every flow: the receivers'
    kernels' byte counts when sampled, else iperf3's per-second receiver reports."""
    v = rx.total_bps(ports, t0 + skip, t0 + secs)
    return v if v == v else pe.receiver_total_bps(flows, skip, secs)


KILL_AFTER = None   # --kill-flow-at: (flow, s), a client that never reports (tests)


def run(tb, cfgdir, mode, case, secs, limit, skip, rtt_s, weights=None, cbr_at=None,
        follow=None):
    """One run of `mode`; returns (summary row, per-flow series rows)."""
    n = len(weights) if weights else FLOWS
    if pe._next_cport[0] + n > pe.CPORT_SPAN:
        pe._next_cport[0] = 0
    base = CPORT + pe._next_cport[0]
    cbr = cbr_at is not None
    link = LINK_BPS
    if mode == "htb":
        tb.start_gateway("linux-htb", htb_spec=htb_spec(link, limit, cbr))
        # HTB's exp leaf is the second class with cbr (10 + index).
        htb_exp = 11 if cbr else 10
    else:
        cfg = cfgdir / f"{case}-{mode}.cfg"
        os.environ["WEIR_TESTBED_CFG"] = str(weir_config(cfg, mode, link, 0, weights, cbr,
                                                         base, n))
        tb.start_gateway("weir")
    emu0 = emu_drops(tb)
    pairs = [(tb.lan_hosts[i % tb.nlan], tb.wan_hosts[0]) for i in range(n)]
    stop = threading.Event()
    extra = []
    if follow is not None and mode != "htb":
        extra.append(threading.Thread(target=follow, args=(tb, cfg, mode, stop, weights, base, n),
                                      daemon=True))
    if cbr:
        def cbr_flow():
            if stop.wait(cbr_at):
                return
            srv = tb.popen(tb.wan_hosts[0], ["iperf3", "-s", "-1", "-p", "7000"])
            time.sleep(0.5)
            tb.run(tb.lan_hosts[0], ["iperf3", "-u", "-c", tb.addr(tb.wan_hosts[0]), "-p",
                                     "7000", "-b", "512k", "-l", "400", "-t",
                                     str(max(1, int(secs - cbr_at - 2)))],
                   timeout=secs + 30, check=False)
            srv.kill()
            srv.communicate()
        extra.append(threading.Thread(target=cbr_flow, daemon=True))
    smp = pe.Sampler(tb, counters=exp_counters(11 if cbr else 10))
    rx = pe.RxBytes(tb, sorted({p[1] for p in pairs}), CPORT, CPORT + pe.CPORT_SPAN - 1)
    with smp, rx, Capture(tb, sorted({p[0] for p in pairs}), CAPDIR,
                          f"{case}-{mode}-{limit}") as cap:
        for t in extra:
            t.start()
        t_iperf, t_mono = smp.now(), time.monotonic()
        flows = pe.iperf_cport(tb, pairs, secs, SENDER_CC, None, kill_after=KILL_AFTER,
                               stagger=STAGGER)
        stop.set()
    ports = [base + i for i in range(n)]
    fill_from_rx(flows, rx, ports, t_mono, secs)
    for t in extra:
        t.join(timeout=30)
    frames = cap.frames()
    es, es_cum, retx = esdl(frames, rtt_s)
    drain = (limit or 30) * 1500 * 8 / LINK_BPS
    esv = [e for _, e in es]
    t0 = frames[0][0] if frames else 0.0
    steady = [e for t, e in es if t - t0 >= skip]
    wd = weir_drops(tb) if mode != "htb" else \
        weirtb.htb.leaf_stats("outbound").get(htb_exp, {}).get("drops", 0)
    ed = emu_drops(tb) - emu0
    means, stds, series_rows = [], [], []
    for f in flows:
        s = running(f.interval_bps)
        s_steady = s[max(0, skip - 4):]
        if len(s_steady) >= 2:
            means.append(statistics.mean(s_steady) / 1e3)
            stds.append(statistics.pstdev(s_steady) / 1e3)
        series_rows.append([case, mode, limit, f.flow, weights[f.flow] if weights else 1] +
                           [round(x / 1e3, 2) for x in s])
    row = {
        "case": case, "mode": mode, "queue": limit, "flows": n, "secs": secs,
        "flow_mean_kbps": statistics.mean(means) if means else float("nan"),
        "flow_std_kbps_median": statistics.median(stds) if stds else float("nan"),
        "flow_std_kbps_max": max(stds) if stds else float("nan"),
        # What the receivers got from --skip s to the end of the run, every flow, finished
        # or not (a flow whose iperf3 client never reported is read from its server); the
        # sum of the finished flows' means left out every byte of the others (postack:
        # 471 of the 1,523 kbit/s its class sent).
        "total_kbps": rx_total(flows, rx, ports, t_mono, skip, secs) / 1e3,
        "unfinished": sum(1 for f in flows if getattr(f, "rx_source", "client") != "client"
                          or f.error),
        # What the class carried on the wire over the same window (weir's or HTB's
        # counters, frames with their 24 bytes of wire overhead in weir): the ceiling the
        # receivers' total is checked against.
        "class_kbps": smp.rate_between(t_iperf + skip, t_iperf + secs) * 8 / 1e3,
        "jain": (sum(means) ** 2 / (len(means) * sum(m * m for m in means))) if means else 0,
        "esdl_mean_ms": statistics.mean(esv) * 1e3 if esv else float("nan"),
        "esdl_std_ms": statistics.pstdev(esv) * 1e3 if esv else float("nan"),
        "esdl_max_ms": max(esv) * 1e3 if esv else float("nan"),
        "esdl_over_pct": 100 * sum(1 for e in esv if e >= drain) / len(esv) if esv else float("nan"),
        "over117_pct": 100 * sum(1 for e in esv if e >= 0.117) / len(esv) if esv else float("nan"),
        # Cumulative ACKs only (in-order delivery: a segment behind a hole waits for it).
        "cum_esdl_mean_ms": statistics.mean(e for _, e in es_cum) * 1e3 if es_cum else float("nan"),
        "cum_over_drain_pct": 100 * sum(1 for _, e in es_cum if e >= drain) / len(es_cum)
        if es_cum else float("nan"),
        # From --skip s on: without the start, where 32 senders' initial windows (IW10:
        # 320 segments, 2.5 s of the link) land at once.
        "steady_esdl_mean_ms": statistics.mean(steady) * 1e3 if steady else float("nan"),
        "steady_esdl_max_ms": max(steady) * 1e3 if steady else float("nan"),
        "steady_over_drain_pct": 100 * sum(1 for e in steady if e >= drain) / len(steady)
        if steady else float("nan"),
        "segments": len(esv), "retx_segments": retx,
        "gw_drops": wd, "emu_drops": ed,
        "iperf_errors": sum(1 for f in flows if f.error),
        "errors": sorted({str(f.error)[:100] for f in flows if f.error}),
        "sender_rtt_ms": statistics.median([f.mean_rtt_ms for f in flows if f.mean_rtt_ms])
        if any(f.mean_rtt_ms for f in flows) else float("nan"),
    }
    if weights:
        for w in sorted(set(weights)):
            g = [m for f, m in zip(flows, means) if weights[f.flow] == w]
            row[f"w{w}_kbps"] = statistics.mean(g) if g else float("nan")
    if cbr:
        half = []
        for f in flows:
            s = f.interval_bps
            a = s[skip:cbr_at] if cbr_at > skip else []
            b = s[cbr_at + 5:]
            half.append((sum(a) / len(a) if a else 0, sum(b) / len(b) if b else 0))
        row["before_kbps"] = sum(x for x, _ in half) / 1e3
        row["after_kbps"] = sum(y for _, y in half) / 1e3
    es_rows = [(case, mode, limit, round(t - frames[0][0], 3), round(e * 1e3, 1))
               for t, e in es[::max(1, len(es) // 4000)]] if frames else []
    print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}),
          flush=True)
    return row, series_rows, es_rows


# ----- the cases ----------------------------------------------------------------------
def testbed(limit, delay, sched=""):
    for c in ("reno", "cubic", "bbr"):
        weirtb.topology.allow_congestion_control(c)
    path = PathSpec(delay=delay, rate="0" if sched else f"{LINK_BPS}", limit=limit, sched=sched)
    tb = weirtb.Testbed(lan=2, wan=1, gateway="weir", emu="wanemu", paths=[path])
    tb.claim().up()
    for h in tb.lan_hosts + tb.wan_hosts:
        tb.set_cc(h, SENDER_CC)
    return tb


MODES_ALL = ["ipabr", "postack", "tcr", "pfq", "tcp", "htb"]


def modes(args, default):
    return [m for m in default if not args.modes or m in args.modes.split(",")]


def case_runs(args, out, case, limit, ms, **kw):
    tb = testbed(limit, args.delay, kw.pop("sched", ""))
    rows, series, es = [], [], []
    try:
        for k in range(args.runs):
            for m in ms:
                r, s, e = run(tb, CAPDIR, m, case, args.secs, limit, args.skip,
                              2 * args.delay / 1e3, **kw)
                r["run"], r["commit"] = k, COMMIT
                rows.append(r)
                series += s
                es += e
    finally:
        if tb.gateway_running:
            tb.stop_gateway()
        tb.down()
    return rows, series, es


def follow_link(tb, cfg, mode, stop, weights, base, n):
    """The BMS: read the emulator's rate in force (its stats, every second) and, when it
    changes, write it as weir's link rate and reload weir's policy (SIGHUP)."""
    last = None
    while not stop.wait(0.25):
        try:
            st = tb.wanemu_stats()
            rate = next(iter(st["paths"].values()))["to_path"]["rate_bps"]
        except Exception:  # noqa: BLE001
            continue
        if rate and rate != last:
            weir_config(cfg, mode, int(rate), 0, weights, False, base, n)
            tb.signal_gateway(signal.SIGHUP)
            last = rate


# ----- the silly-window credit sweep (Secs. 5.3-5.4) ----------------------------------
SWS_MSS = [256, 536, 1024, 1452]          # the thesis' segment sizes (payload, bytes)
SWS_RTT_MS = [910, 955, 1000, 1050, 1100]  # the thesis' paths span 910-1100 ms
SWS_FLOWS = 64                            # the thesis' N (Eq. 5.3)
SWS_SECS = 100                            # the thesis' T
WIRE_HDR = 32 + 20 + 14 + 24              # TCP with timestamps, IP, Ethernet, wire overhead
# Sec. 5.4.2: the mean utilisation of all flows (Eq. 5.3: payload over the link's rate),
# NS-2 simulation, MSS 536 plotted (Fig. 5.6), "similar" at 256 and 1440.
THESIS_SWS = {"off": 0.86, "on": 0.90}


def sws_payload(mss):
    """The segment payload a run gets for the thesis' MSS: iperf3 -M sets the MSS with
    options included (timestamps: 12 bytes), and 1500-byte frames carry at most 1448."""
    return min(mss, 1448)


def sws_config(path, credit, n_ports):
    text = weir_config(path, "ipabr", LINK_BPS).read_text()
    text = text.replace(f'lan_port = "{CPORT}-{CPORT + 99}"', f'lan_port = "{CPORT}-{CPORT + n_ports - 1}"')
    text = text.replace("shaping = {\n", "shaping = {\n  ipabr = { sws_credit = %s; };\n"
                        % ("true" if credit else "false"), 1)
    path.write_text(text)
    return path


def sws_model(mss, rtt_ms, flows):
    """Sec. 5.3's estimate without the credit: Eq. 4.6's window for the flow's share and
    round trip, rounded down to whole segments by the sender; the fraction of the share
    that leaves. (weir's data_size/MTU: payload over the frame with wire overhead.)"""
    pay = sws_payload(mss)
    wnd = LINK_BPS / 8 / flows * pay / (pay + WIRE_HDR) * rtt_ms / 1e3
    return (wnd // pay) * pay / wnd if wnd >= pay else 1.0


def sws_runs(args, out):
    """Every MSS with the credit on and off: N flows from two LAN hosts to WAN hosts one
    per round trip, weir's ipabr class the 1.536 Mbit/s bottleneck (the emulator only
    delays). Per flow: goodput at the receiver from --skip s to the end, as utilisation
    of the link (Eq. 5.3: N x goodput / link) and of its share's payload."""
    rtts = [float(x) for x in args.sws_rtts.split(",")]
    msss = [int(x) for x in args.sws_mss.split(",")]
    n = args.flows or SWS_FLOWS
    pe.CPORT_SPAN = 200             # two runs' ports apart: a port in TIME_WAIT is not reused
    paths = [PathSpec(delay=r / 2, rate="0", limit=1000) for r in rtts]
    for c in ("reno", "cubic", "bbr"):
        weirtb.topology.allow_congestion_control(c)
    tb = weirtb.Testbed(lan=2, wan=len(rtts), gateway="weir", emu="wanemu", paths=paths)
    tb.claim().up()
    rows, flows_out = [], []
    try:
        for h in tb.lan_hosts + tb.wan_hosts:
            tb.set_cc(h, SENDER_CC)
        cells = [(k, ws, mss, credit) for k in range(args.runs)
                 for ws in args.sws_wscale.split(",") for mss in msss
                 for credit in ([True, False] if args.sws_credit == "both" else
                                [args.sws_credit == "on"])]
        for run_k, wscale, mss, credit in cells:
            for h in tb.wan_hosts:      # the receivers' window scaling (per namespace)
                tb.run(h, ["sysctl", "-qw", "net.ipv4.tcp_window_scaling="
                           + ("1" if wscale == "on" else "0")])
            cfg = sws_config(CAPDIR / f"sws-{mss}-{int(credit)}.cfg", credit, pe.CPORT_SPAN)
            os.environ["WEIR_TESTBED_CFG"] = str(cfg)
            tb.start_gateway("weir")
            pairs = [(tb.lan_hosts[i % tb.nlan], tb.wan_hosts[i % tb.nwan]) for i in range(n)]
            smp = pe.Sampler(tb, counters=exp_counters(10))
            if pe._next_cport[0] + n > pe.CPORT_SPAN:
                pe._next_cport[0] = 0
            ports = [CPORT + pe._next_cport[0] + i for i in range(n)]
            rx = pe.RxBytes(tb, tb.wan_hosts, CPORT, CPORT + pe.CPORT_SPAN - 1)
            with smp, rx:
                t_iperf, t_mono = smp.now(), time.monotonic()
                flows = pe.iperf_cport(tb, pairs, args.secs, SENDER_CC, None,
                                       extra_args=["-M", str(sws_payload(mss) + 12)],
                                       stagger=STAGGER)
            fill_from_rx(flows, rx, ports, t_mono, args.secs)
            rx_all = rx_total(flows, rx, ports, t_mono, args.skip, args.secs)
            st = tb.weir_stats()
            ia = st.get("ipabr") or {}
            tb.stop_gateway()
            pay = sws_payload(mss)
            share_pay = LINK_BPS / n * pay / (pay + WIRE_HDR)
            per = []
            for f in flows:
                rtt = rtts[f.flow % tb.nwan]
                iv = f.interval_bps[args.skip:args.secs]
                g = sum(iv) / max(1, args.secs - args.skip)
                per.append((rtt, g))
                flows_out.append(["sws", mss, "on" if credit else "off", wscale, run_k,
                                  f.flow, rtt,
                                  round(g / 1e3, 3), round(n * g / LINK_BPS, 4),
                                  round(g / share_pay, 4)])
            total = sum(g for _, g in per)
            for rtt in rtts + ["all"]:
                gs = [g for r, g in per if rtt == "all" or r == rtt]
                row = {
                    "case": "sws", "mss": mss, "payload": pay, "credit": "on" if credit else "off",
                    "wscale": wscale, "run": run_k, "commit": COMMIT,
                    "rtt_ms": rtt, "flows": len(gs), "secs": args.secs,
                    "flow_kbps": statistics.mean(gs) / 1e3 if gs else float("nan"),
                    "util_link": statistics.mean(n * g / LINK_BPS for g in gs) if gs else float("nan"),
                    "util_share": statistics.mean(g / share_pay for g in gs) if gs else float("nan"),
                    "util_share_min": min(g / share_pay for g in gs) if gs else float("nan"),
                    "util_share_max": max(g / share_pay for g in gs) if gs else float("nan"),
                    "model_share_nocredit": sws_model(mss, rtt, n) if rtt != "all"
                    else statistics.mean(sws_model(mss, r, n) for r, _ in per),
                    "total_kbps": rx_all / 1e3 if rtt == "all" else float("nan"),
                    "total_iperf_kbps": total / 1e3 if rtt == "all" else float("nan"),
                    "class_kbps": smp.rate_between(t_iperf + args.skip, t_iperf + args.secs)
                    * 8 / 1e3 if rtt == "all" else float("nan"),
                    "unfinished": sum(1 for f in flows if getattr(f, "rx_source", "client")
                                      != "client" or f.error) if rtt == "all" else "",
                    "sub_mss_acks": ia.get("sub_mss", "") if rtt == "all" else "",
                }
                rows.append(row)
            print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                              for k, v in rows[-1].items()}), flush=True)
    finally:
        if tb.gateway_running:
            tb.stop_gateway()
        tb.down()
    keys = list(rows[0].keys()) if rows else []
    with open(out / "sws.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(keys)
        for r in rows:
            w.writerow([round(r[k], 4) if isinstance(r[k], float) else r[k] for k in keys])
    with open(out / "sws_flows.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["case", "mss", "credit", "wscale", "run", "flow", "rtt_ms", "goodput_kbps",
                    "util_link",
                    "util_share"])
        w.writerows(flows_out)
    plot_sws(out, flows_out)


def plot_sws(out, flows_out):
    """Per-flow utilisation of its share against its round trip, credit on and off, one
    panel per MSS (Fig. 5.4 / 5.6)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = sorted({(r[3], r[1]) for r in flows_out}, key=lambda x: (x[0] != "on", x[1]))
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4), squeeze=False,
                             sharey=True)
    for ax, (ws, mss) in zip(axes[0], panels):
        for credit, mk in (("off", "x"), ("on", "o")):
            pts = [(r[6], r[9]) for r in flows_out if (r[3], r[1], r[2]) == (ws, mss, credit)]
            if pts:
                ax.scatter([x for x, _ in pts], [y for _, y in pts], marker=mk, s=14,
                           label=f"credit {credit}")
        ax.set_title(f"MSS {mss}, receivers' window scaling {ws}", fontsize=9)
        ax.set_xlabel("path RTT ms")
        ax.set_ylabel("goodput / share's payload")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "sws.png", dpi=100)
    plt.close(fig)


KEYS = ["case", "mode", "queue", "run", "commit", "flows", "secs", "flow_mean_kbps", "flow_std_kbps_median",
        "flow_std_kbps_max", "total_kbps", "jain", "esdl_mean_ms", "esdl_std_ms", "esdl_max_ms",
        "esdl_over_pct", "over117_pct", "steady_esdl_mean_ms", "steady_esdl_max_ms",
        "steady_over_drain_pct", "cum_esdl_mean_ms", "cum_over_drain_pct", "segments", "retx_segments", "gw_drops", "emu_drops", "iperf_errors",
        "unfinished", "class_kbps", "sender_rtt_ms"]


def save(out, name, rows, series, es, extra=()):
    keys = KEYS + [k for k in extra if any(k in r for r in rows)]
    with open(out / f"{name}.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(keys)
        for r in rows:
            w.writerow([round(r.get(k), 3) if isinstance(r.get(k), float) else r.get(k, "")
                        for k in keys])
    with open(out / f"{name}_series.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["case", "mode", "queue", "flow", "weight", "kbps_5s_window_from_t5..."])
        w.writerows(series)
    with open(out / f"{name}_esdl.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["case", "mode", "queue", "t_s", "esdl_ms"])
        w.writerows(es)
    plot_series(out, name, series)


def plot_series(out, name, series):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = sorted({(r[1], r[2]) for r in series}, key=lambda x: (x[1], MODES_ALL.index(x[0])
                                                                if x[0] in MODES_ALL else 9))
    if not runs:
        return
    cols = min(3, len(runs))
    rowsn = (len(runs) + cols - 1) // cols
    fig, axes = plt.subplots(rowsn, cols, figsize=(5 * cols, 3.2 * rowsn), squeeze=False,
                             sharey=True)
    for ax, (mode, q) in zip(axes.flat, runs):
        for r in series:
            if r[1] == mode and r[2] == q:
                ax.plot(range(5, 5 + len(r[5:])), r[5:], lw=0.7)
        ax.set_title(f"{mode}, queue {q}" if q else mode, fontsize=9)
        ax.set_xlabel("s")
        ax.set_ylabel("kbit/s (5 s window)")
    for ax in list(axes.flat)[len(runs):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=100)
    plt.close(fig)


def med_range(vals, fmt="{:.2f}"):
    """"median [min-max] (n)" of the numbers in vals (blanks and NaN left out)."""
    v = []
    for x in vals:
        try:
            f = float(x)
        except (TypeError, ValueError):
            continue
        if f == f:
            v.append(f)
    if not v:
        return "-"
    m = statistics.median(v)
    if len(v) == 1:
        return fmt.format(m) + " (1 run)"
    return f"{fmt.format(m)} [{fmt.format(min(v))}-{fmt.format(max(v))}] ({len(v)})"


# Per case, the columns the summary gives (CSV key, heading, format).
SUMMARY_COLS = [("flow_std_kbps_median", "flow std kbit/s (median of flows)", "{:.2f}"),
                ("jain", "Jain", "{:.3f}"),
                ("sender_rtt_ms", "senders' RTT ms", "{:.0f}"),
                ("steady_esdl_mean_ms", "ESDL mean ms from 20 s", "{:.0f}"),
                ("steady_over_drain_pct", "ESDL >= drain % from 20 s", "{:.2f}"),
                ("retx_segments", "retransmitted segments", "{:.0f}"),
                ("total_kbps", "total kbit/s", "{:.0f}")]


def summary(out):
    """The medians and ranges over runs, per case and cell, and the commits they come from."""
    lines, commits = [], set()
    for name in ("droptail", "weighted", "variation", "cbr"):
        p = out / f"{name}.csv"
        rows = list(csv.DictReader(open(p))) if p.exists() else []
        if not rows:
            continue
        commits |= {r.get("commit") or "before the commit column" for r in rows}
        cols = list(SUMMARY_COLS)
        if name == "weighted":
            cols += [(f"w{w}_kbps", f"w{w} kbit/s a flow", "{:.1f}") for w in (1, 2, 4, 8)]
        if name == "cbr":
            cols += [("before_kbps", "bulk before CBR", "{:.0f}"),
                     ("after_kbps", "bulk after", "{:.0f}")]
        lines += [f"### {name}", "", "| queue | mode | " + " | ".join(h for _, h, _ in cols) + " |",
                  "|---|---|" + "---|" * len(cols)]
        cells = []
        for r in rows:
            if (r["queue"], r["mode"]) not in cells:
                cells.append((r["queue"], r["mode"]))
        for q, m in cells:
            g = [r for r in rows if (r["queue"], r["mode"]) == (q, m)]
            lines.append(f"| {q} | {m} | " + " | ".join(med_range([r.get(k) for r in g], f)
                                                      for k, _, f in cols) + " |")
        lines.append("")
    p = out / "sws.csv"
    sw = [r for r in csv.DictReader(open(p)) if r["rtt_ms"] == "all"] if p.exists() else []
    if sw:
        commits |= {r.get("commit") or "before the commit column" for r in sw}
        lines += ["### sws (every flow)", "", "| receivers' window scaling | MSS | credit | "
                  "utilisation of the link (Eq. 5.3) | of the share's payload |",
                  "|---|---|---|---|---|"]
        cells = []
        for r in sw:
            k = (r.get("wscale") or "on", r["mss"], r["credit"])
            if k not in cells:
                cells.append(k)
        for ws, mss, cr in cells:
            g = [r for r in sw if ((r.get("wscale") or "on"), r["mss"], r["credit"]) == (ws, mss, cr)]
            lines.append(f"| {ws} | {mss} | {cr} | {med_range([r['util_link'] for r in g], '{:.3f}')} "
                         f"| {med_range([r['util_share'] for r in g], '{:.3f}')} |")
        lines.append("")
    head = ["## Medians over runs: median [min-max] (runs)", "",
            "Commit(s) the rows come from: " + ", ".join(sorted(commits)) + ".", ""]
    return head + lines if lines else []


def report(out):
    """README-table.md: weir's figures with the thesis' beside them."""
    lines = ["# IP-ABR (seed 000, chapter 7) in the testbed: the tables", "",
             "Generated by `scripts/ipabr_experiments.py` from the CSVs here (see README.md).", ""]
    lines += summary(out)
    lines += ["## Every run", ""]

    def load(name):
        p = out / f"{name}.csv"
        rows = list(csv.DictReader(open(p))) if p.exists() else []
        if rows and "steady_over_drain_pct" not in rows[0] and (out / f"{name}_esdl.csv").exists():
            # CSVs of an earlier version: the steady-state and 117 ms figures from the
            # ESDL sample (every k-th segment, at most 4000 a run) it wrote.
            sample = {}
            for e in csv.DictReader(open(out / f"{name}_esdl.csv")):
                sample.setdefault((e["mode"], e["queue"]), []).append(
                    (float(e["t_s"]), float(e["esdl_ms"])))
            for r in rows:
                sm = sample.get((r["mode"], r["queue"]), [])
                drain = (int(r["queue"]) or 30) * 1500 * 8 / LINK_BPS * 1e3
                st = [e for t, e in sm if t >= 20] or [float("nan")]
                r["over117_pct"] = 100 * sum(1 for _, e in sm if e >= 117) / max(1, len(sm))
                r["steady_esdl_mean_ms"] = statistics.mean(st)
                r["steady_esdl_max_ms"] = max(st)
                r["steady_over_drain_pct"] = 100 * sum(1 for e in st if e >= drain) / len(st)
                r["from_sample"] = True
        return rows
    dt = load("droptail")
    if dt:
        lines += ["## Drop-tail (Tables 7.3-7.8): 32 flows, 1.536 Mbit/s, 900 ms RTT", "",
                  "Goodput per flow over a 5 s window from 20 s on; ESDL of every segment of the "
                  "whole run, and (steady) of those first sent from 20 s on. Total: what the "
                  "receivers got from 20 s to the end of the run, every flow, its iperf3 client "
                  "finished or not (the receivers' kernels' byte counts; unfinished: flows "
                  "iperf3 gave no report for, series from their server or kernel); class: what weir's (HTB's) "
                  "class carried on the wire over the same span, headers and 24 bytes of wire "
                  "overhead a frame included. Thesis: one random "
                  "flow's mean and std, ESDL >= 117 ms and >= the drain time over the run, one "
                  "flow's ESDL mean/std, the largest ESDL.", "",
                  "| queue | mode | flow mean kbit/s | flow std kbit/s (median / max) | total "
                  "kbit/s (unfinished flows) / class kbit/s | Jain | ESDL mean / std / max ms | "
                  ">= 117 ms % | >= drain % | steady: "
                  "ESDL mean / max ms, >= drain % | retx segs | drops gw / emu | sender srtt ms |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in dt:
            f = {k: float(v) if isinstance(v, (str, float)) and k not in ("case", "mode", "commit") and v != ""
                 else v for k, v in r.items()}
            f.setdefault("class_kbps", float("nan"))
            if f["class_kbps"] == "":
                f["class_kbps"] = float("nan")
            lines.append(
                f"| {r['queue']} | {r['mode']} | {f['flow_mean_kbps']:.1f} | "
                f"{f['flow_std_kbps_median']:.2f} / {f['flow_std_kbps_max']:.2f} | "
                f"{f['total_kbps']:.0f} ({r.get('unfinished') or '-'}) / "
                + (f"{f['class_kbps']:.0f}" if f["class_kbps"] == f["class_kbps"] else "-") +
                f" | {f['jain']:.3f} | "
                f"{f['esdl_mean_ms']:.0f} / {f['esdl_std_ms']:.0f} / {f['esdl_max_ms']:.0f} | "
                f"{f['over117_pct']:.2f} | {f['esdl_over_pct']:.2f} | "
                f"{f['steady_esdl_mean_ms']:.0f} / {f['steady_esdl_max_ms']:.0f}, "
                f"{f['steady_over_drain_pct']:.2f} | {r['retx_segments']} | "
                f"{r['gw_drops']} / {r['emu_drops']} | {f['sender_rtt_ms']:.0f} |")
            th = THESIS.get(int(r["queue"]), {}).get(r["mode"])
            if th:
                lines.append(
                    f"| {r['queue']} | *thesis {'IP-ABR' if r['mode'] == 'ipabr' else 'TCP'}* | "
                    f"*{th['mean_kbps']}* | *{th['std_kbps']}* | | | "
                    + (f"*{th['esdl_mean_ms']} / {th['esdl_std_ms']} / {th['esdl_max_ms']}* (one flow; max of all)"
                       if "esdl_mean_ms" in th else "") +
                    f" | *{th['over117_pct']}* | "
                    + (f"*{th['over_drain_pct']}*" if "over_drain_pct" in th else "") +
                    " | | | | |")
        if any(r.get("from_sample") for r in dt):
            lines.append("")
            lines.append("(>= 117 ms and steady columns computed from the ESDL sample in "
                         "droptail_esdl.csv: every k-th segment, at most 4000 per run.)")
        lines.append("")
    wt = load("weighted")
    if wt:
        lines += ["## Weighted 1:2:4:8 (Sec. 7.4.2, Fig. 7.19): four groups of 8 flows, queue 30",
                  "", "| mode | w1 | w2 | w4 | w8 kbit/s per flow | ratio to w1 | flow std median |",
                  "|---|---|---|---|---|---|---|"]
        for r in wt:
            g = [float(r.get(f"w{w}_kbps") or "nan") for w in (1, 2, 4, 8)]
            lines.append(f"| {r['mode']} | " + " | ".join(f"{x:.1f}" for x in g) +
                         f" | {':'.join(f'{x / g[0]:.2f}' for x in g)} | "
                         f"{float(r['flow_std_kbps_median']):.2f} |")
        lines.append("")
    va = load("variation")
    if va:
        lines += ["## Available-bandwidth variation (Sec. 7.5): 192000 / 64000 B/s every 20 s, "
                  "queue 30", "", "| mode | total kbit/s | ESDL mean / max ms | ESDL >= drain % | "
                  "drops gw / emu | retx segs |", "|---|---|---|---|---|---|"]
        for r in va:
            lines.append(f"| {r['mode']} | {float(r['total_kbps']):.0f} | "
                         f"{float(r['esdl_mean_ms']):.0f} / {float(r['esdl_max_ms']):.0f} | "
                         f"{float(r['esdl_over_pct']):.2f} | {r['gw_drops']} / {r['emu_drops']} | "
                         f"{r['retx_segments']} |")
        lines.append("")
    cb = load("cbr")
    if cb:
        lines += ["## A 512 kbit/s high-priority class starting half way (Sec. 5.2, Eq. 4.3), "
                  "queue 30", "", "| mode | bulk kbit/s before | after | ESDL >= drain % | "
                  "drops gw / emu |", "|---|---|---|---|---|"]
        for r in cb:
            lines.append(f"| {r['mode']} | {float(r['before_kbps']):.0f} | "
                         f"{float(r['after_kbps']):.0f} | {float(r['esdl_over_pct']):.2f} | "
                         f"{r['gw_drops']} / {r['emu_drops']} |")
        lines.append("")
    sw = list(csv.DictReader(open(out / "sws.csv"))) if (out / "sws.csv").exists() else []
    if sw:
        n = sw[0]["flows"] if sw[0]["rtt_ms"] == "all" else \
            next((r["flows"] for r in sw if r["rtt_ms"] == "all"), "?")
        lines += ["## Silly-window credit (Secs. 5.3-5.4, Eq. 5.4-5.6): utilisation by MSS and "
                  "RTT", "",
                  f"{n} flows, weir's ipabr class the 1.536 Mbit/s bottleneck, equal shares; "
                  "goodput at the receiver from --skip s to the end. `link`: Eq. 5.3 (N x "
                  "goodput / 1.536 Mbit/s, headers count as loss, the thesis' measure); `share`: "
                  "goodput / the share's payload (1.0 = the allocation exactly, headers "
                  "excluded); `model`: Sec. 5.3's estimate without the credit (Eq. 4.6's "
                  "window rounded down to whole segments). Thesis (NS-2, MSS 536 plotted): "
                  f"mean utilisation {THESIS_SWS['off']:.0%} without the credit, "
                  f"{THESIS_SWS['on']:.0%} with it.", "",
                  "| MSS (payload) | RTT ms | credit off: link / share (min-max) | model | "
                  "credit on: link / share (min-max) | total kbit/s off / on | class kbit/s off / on |",
                  "|---|---|---|---|---|---|---|"]

        def g(r, k):
            try:
                return float(r[k])
            except (KeyError, ValueError):
                return float("nan")
        keyset = []
        for r in sw:
            k = (r["mss"], r["rtt_ms"])
            if k not in keyset:
                keyset.append(k)
        for mss, rtt in keyset:
            off = next((r for r in sw if (r["mss"], r["rtt_ms"], r["credit"]) == (mss, rtt, "off")), {})
            on = next((r for r in sw if (r["mss"], r["rtt_ms"], r["credit"]) == (mss, rtt, "on")), {})
            pay = (off or on).get("payload", mss)

            def cell(r):
                if not r:
                    return "-"
                return (f"{g(r, 'util_link'):.3f} / {g(r, 'util_share'):.3f} "
                        f"({g(r, 'util_share_min'):.2f}-{g(r, 'util_share_max'):.2f})")
            b = "**" if rtt == "all" else ""
            lines.append(f"| {mss} ({pay}) | {b}{rtt}{b} | {cell(off)} | "
                         f"{g(off or on, 'model_share_nocredit'):.3f} | {cell(on)} | "
                         + (f"{g(off, 'total_kbps'):.0f} / {g(on, 'total_kbps'):.0f} | "
                            f"{g(off, 'class_kbps'):.0f} / {g(on, 'class_kbps'):.0f} |"
                            if rtt == "all" else " | |"))
        lines.append(f"| *thesis, 536, 910-1100 ms* | | *{THESIS_SWS['off']}* (link) | | "
                     f"*{THESIS_SWS['on']}* (link) | | |")
        lines.append("")
    (out / "README-table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    global FLOWS, KILL_AFTER, STAGGER
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", choices=["droptail", "weighted", "variation", "cbr", "sws", "all",
                                     "report"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--secs", type=int, help="s per run (default 120; sws: 100, the thesis' T)")
    ap.add_argument("--skip", type=int, default=20, help="s of each run left out of mean/std")
    ap.add_argument("--queues", default="15,30,1000",
                    help="the emulator's drop-tail queue, packets (1000: its default, the "
                         "case a user meets; weir's own limits are always its defaults)")
    ap.add_argument("--runs", type=int, default=5, help="runs per cell (median and range)")
    ap.add_argument("--stagger", default="8/0.5",
                    help="start N flows every S s (N/S; 0: all at once)")
    ap.add_argument("--modes")
    ap.add_argument("--delay", type=float, default=DELAY_MS, help="ms one way")
    ap.add_argument("--flows", type=int, help=f"flows (default {FLOWS}; sws: {SWS_FLOWS})")
    ap.add_argument("--sws-mss", default=",".join(map(str, SWS_MSS)))
    ap.add_argument("--sws-rtts", default=",".join(map(str, SWS_RTT_MS)), help="ms, one WAN host each")
    ap.add_argument("--sws-credit", choices=["both", "on", "off"], default="both")
    ap.add_argument("--sws-wscale", default="on,off",
                    help="the receivers' window scaling: on (Linux's default, scale 10 here), "
                         "off (net.ipv4.tcp_window_scaling=0: windows to the byte, where the "
                         "credit should matter), or both")
    ap.add_argument("--kill-flow-at", type=float, metavar="S",
                    help="kill flow 0's iperf3 client S s into each run: a flow that never "
                         "reports (tests that the total still counts it)")
    ap.add_argument("--out", default=str(REPO / "docs" / "results" / "ipabr"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    CAPDIR.mkdir(parents=True, exist_ok=True)
    if args.case == "report":
        report(out)
        return
    STAGGER = None if args.stagger in ("0", "") else \
        (int(args.stagger.split("/")[0]), float(args.stagger.split("/")[1]))
    if args.kill_flow_at is not None:
        KILL_AFTER = (0, args.kill_flow_at)
    if args.quick:
        FLOWS, args.secs, args.skip, args.delay, args.queues = 4, 12, 4, 50, "1000"
        args.runs, args.sws_wscale = 1, "on"
        args.modes = args.modes or "ipabr,htb"
        args.flows = args.flows or 4
        if args.sws_rtts == ",".join(map(str, SWS_RTT_MS)):
            args.sws_rtts = "100,150"
        if args.sws_mss == ",".join(map(str, SWS_MSS)):
            args.sws_mss = "536"
    elif args.flows and args.case != "sws":
        FLOWS = args.flows
    cases = ["droptail", "weighted", "variation", "cbr", "sws"] if args.case == "all" else [args.case]
    if args.quick and args.case == "all":
        cases = ["droptail"]
    secs = args.secs
    for case in cases:
        args.secs = secs or (SWS_SECS if case == "sws" else 120)
        if case == "droptail":
            rows, series, es = [], [], []
            for q in [int(x) for x in args.queues.split(",")]:
                r, s, e = case_runs(args, out, "droptail", q, modes(args, MODES_ALL))
                rows += r
                series += s
                es += e
            save(out, "droptail", rows, series, es)
        elif case == "weighted":
            weights = [1] * 8 + [2] * 8 + [4] * 8 + [8] * 8
            r, s, e = case_runs(args, out, "weighted", 30, modes(args, ["ipabr", "pfq"]),
                                weights=weights)
            save(out, "weighted", r, s, e, extra=["w1_kbps", "w2_kbps", "w4_kbps", "w8_kbps"])
        elif case == "variation":
            r, s, e = case_runs(args, out, "variation", 30, modes(args, ["ipabr", "pfq", "tcp"]),
                                sched="steps:192kbps/20/64kbps/20", follow=follow_link)
            save(out, "variation", r, s, e)
        elif case == "cbr":
            r, s, e = case_runs(args, out, "cbr", 30, modes(args, ["ipabr", "pfq", "htb"]),
                                cbr_at=args.secs // 2)
            save(out, "cbr", r, s, e, extra=["before_kbps", "after_kbps"])
        elif case == "sws":
            sws_runs(args, out)
    report(out)


if __name__ == "__main__":
    main()

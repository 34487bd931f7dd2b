#!/usr/bin/python3
"""Reproduce the PostACK paper's experiments (Figs. 8-11) with real Linux TCP in the testbed.

    scripts/paper_experiments.py fig8|fig9|fig10|fig11|all|report [--quick] [--out DIR]

Each figure runs weir with one experiment class ("exp") in each shaping mode the paper
compares (fifo = its "pure CBQ", pfq, tcr, postack), and the same class as Linux HTB with a
pfifo leaf (mode "htb", the kernel baseline), writes DIR/figN.csv and DIR/figN.png,
and prints a summary table (docs/results/paper.md quotes them). Only the data connections
(iperf3 --cport 6000+) and ping probes are classified into "exp"; iperf3's control
connections go to a separate class so they do not count as flows of the experiment.
Senders use cubic (Figs. 8-10) or each of reno, cubic and bbr (Fig. 11).
--quick runs a reduced sweep (minutes, not an hour). Every run ends by writing
DIR/paper.md from the CSVs there; `report` writes only that.
"""
import argparse
import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import PathSpec  # noqa: E402

STATS_INTERVAL = 0.2
# TCP payload per byte a class is charged: 1448 (MSS with timestamps) of 1538 (the
# frame with FCS, preamble and gap: weir's default overhead).
PAYLOAD_SHARE = 1448 / 1538
MBUF_BYTES = 2368        # one mbuf of weir's default pool (docs/postack.md, Memory)
ACK_RECORD_BYTES = 128   # one held ACK's record (weir_postack_bytes_per_ack())
CPORT = 6000
# Senders of Figs. 8-10: Linux's default congestion control (this machine's default is
# bbr, which namespaces inherit); Fig. 11 compares reno, cubic and bbr.
SENDER_CC = "cubic"


def kbyte_s(x):
    return f"{int(x * 8)}kbit"


def config(path, mode, rate_kBps, limit=0):
    """weir's testbed config with an experiment class of rate_kBps KB/s in `mode`."""
    # The testbed's connectivity ping (before each run) is ICMP like the probe:
    # let its flow expire within the warm-up, or TCR would count it as one of
    # the class's n flows and give each TCP flow half its share.
    base = weirtb.testbed_config_text(stats_interval=STATS_INTERVAL).replace("other = 30;",
                                                                           "other = 2;")
    lim = f" limit = {limit};" if limit else ""
    rate = kbyte_s(rate_kBps)
    link = f"{int(rate_kBps * 8) + 2000}kbit"
    path.write_text(base + f"""shaping = {{
  flow_limit = 1000;
  outbound = {{
    rate = "{link}";
    default = "ctl";
    classes = (
      {{ name = "exp"; rate = "{rate}"; ceil = "{rate}"; mode = "{mode}";{lim} }},
      {{ name = "ctl"; rate = "1mbit"; ceil = "2mbit"; mode = "pfq"; }}
    );
  }};
}};
rules = (
  {{ class = "exp"; proto = "tcp"; lan_port = "{CPORT}-{CPORT + 99}"; }},
  {{ class = "exp"; proto = "icmp"; }}
);
""")
    return path


def htb_spec(rate_kBps, limit):
    """The same classes as config() for Linux HTB (pfifo leaves of `limit` packets)."""
    rate = kbyte_s(rate_kBps)
    return {"outbound": {"rate": f"{int(rate_kBps * 8) + 2000}kbit", "default": "ctl", "classes": [
        {"name": "exp", "rate": rate, "ceil": rate, "prio": 0, "lan_ports": [CPORT, CPORT + 99],
         "icmp": True},
        {"name": "ctl", "rate": "1mbit", "ceil": "2mbit", "prio": 1}]},
        "limit": limit or 1000}


HTB_EXP = 10    # the exp class's leaf id in htb_spec's tree


def gateway_counters(tb):
    """(time, data packets queued in exp, exp bytes, ACKs held, exp drops) from weir's
    stats file or, for Linux HTB, from tc."""
    if tb.gateway_running == "linux-htb":
        q = weirtb.htb.leaf_stats("outbound").get(HTB_EXP, {})
        return time.time(), q.get("qlen", 0), q.get("bytes", 0), 0, q.get("drops", 0)
    st = tb.weir_stats()
    c = st["shaping"]["outbound"]["classes"]["exp"]
    return (st["uptime_s"], c["queued_pkts"], c["bytes"],
            (st.get("postack") or {}).get("acks_held", 0), c["drops_flow"] + c["drops_class"])


class Periodic:
    """A background thread that calls self.sample() every `every` s while the `with`
    block runs, the first time at once; a sample that fails (a half-written stats file,
    a slow `ss` under load, weir restarting) is skipped, the next one is taken."""

    every = STATS_INTERVAL

    def __init__(self):
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def sample(self):
        raise NotImplementedError

    def _run(self):
        while True:
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - skipped, see the class's text
                pass
            if self._stop.wait(self.every):
                return

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


class Sampler(Periodic):
    """The gateway's counters every 0.2 s: data queued in "exp" and ACKs held.

    Rows are (time, queued, bytes, acks held, drops) on the sampler's own clock
    (time.monotonic() from its start), with bytes and drops carried across a restart
    of weir: its uptime and counters start again from zero, and rows keyed on them
    were lost (buffer() kept only rows whose uptime was past the first row's; the
    class rate read 0)."""

    def __init__(self, tb, counters=None):
        super().__init__()
        self.tb, self.rows = tb, []
        self._counters = counters or gateway_counters
        self._t0 = None
        self._last = None            # the last raw (uptime, bytes, drops)
        self._base = [0, 0]          # bytes, drops carried from before restarts
        self.restarts = 0

    def sample(self):
        """Take one sample (the thread calls it every STATS_INTERVAL)."""
        up, q, b, a, d = self._counters(self.tb)[:5]
        now = time.monotonic()
        if self._t0 is None:
            self._t0 = now
        if self._last is not None and (up < self._last[0] or b < self._last[1]
                                       or d < self._last[2]):
            # weir restarted: its counters start again from zero
            self._base[0] += self._last[1]
            self._base[1] += self._last[2]
            self.restarts += 1
        self._last = (up, b, d)
        self.rows.append((now - self._t0, q, self._base[0] + b, a, self._base[1] + d))

    def __enter__(self):
        self._t0 = time.monotonic()
        return super().__enter__()

    def class_rate(self):
        """What the class carried on the wire (bytes/s) while sampled: a ceiling
        no receiver's goodput can pass, to check the goodput against."""
        r = [x for x in self.rows if x[2]]
        if len(r) < 2 or r[-1][0] <= r[0][0]:
            return 0.0
        return (r[-1][2] - r[0][2]) / (r[-1][0] - r[0][0])

    def rate_between(self, t_from, t_to):
        """What the class carried (bytes/s) between t_from and t_to s of the sampler's
        clock, from the first and last sample in that span."""
        r = [x for x in self.rows if t_from <= x[0] <= t_to]
        if len(r) < 2 or r[-1][0] <= r[0][0]:
            return 0.0
        return (r[-1][2] - r[0][2]) / (r[-1][0] - r[0][0])

    def now(self):
        """The sampler's clock now (s)."""
        return time.monotonic() - self._t0 if self._t0 is not None else 0.0

    def buffer(self, skip=4.0):
        return self.buffer_between(self.rows[0][0] + skip if self.rows else 0.0, float("inf"))

    def buffer_between(self, t_from, t_to):
        """Data packets queued, mean and peak, and ACKs held, peak, between t_from and
        t_to s of the sampler's clock."""
        r = [x for x in self.rows if t_from <= x[0] <= t_to]
        q = [x[1] for x in r] or [0]
        a = [x[3] for x in r] or [0]
        return sum(q) / len(q), max(q), max(a)


class RxBytes(Periodic):
    """What the receivers' kernels report received (tcp_info bytes_received, `ss -ti` in
    each receiving host) on every data connection, by the sender's port lo..hi, once a
    second: the receivers' figures whether or not iperf3 ever reports them (a client
    that never finishes, a server that exits without its JSON)."""

    def __init__(self, tb, hosts, lo, hi, every=1.0):
        super().__init__()
        self.tb, self.hosts, self.lo, self.hi, self.every = tb, hosts, lo, hi, every
        self.rows = []

    @staticmethod
    def parse(text, lo, hi):
        """{sender port: bytes_received} from `ss -tinH` output."""
        out, port = {}, None
        for line in text.splitlines():
            if line[:1] not in (" ", "\t"):
                f = line.split()
                port = None
                if len(f) >= 4:
                    try:
                        pp = int(f[-1].rsplit(":", 1)[1])
                    except (IndexError, ValueError):
                        pp = None
                    if pp is not None and lo <= pp <= hi:
                        port = pp
                continue
            m = re.search(r"bytes_received:(\d+)", line)
            if port is not None and m:
                out[port] = max(out.get(port, 0), int(m.group(1)))
        return out

    def sample(self):
        got = {}
        for h in self.hosts:
            r = self.tb.run(h, ["ss", "-tinH"], timeout=10, check=False)
            got.update(self.parse(r.stdout or "", self.lo, self.hi))
        self.rows.append((time.monotonic(), got))

    def at(self, port, t):
        """Bytes the receiver had on that connection at monotonic time t (the last sample
        at or before it; a connection closed earlier keeps its last count)."""
        v = 0
        for ts, got in self.rows:
            if ts > t:
                break
            v = max(v, got.get(port, 0))
        return v

    def total_bps(self, ports, t_from, t_to):
        """bit/s the receivers got on those connections between t_from and t_to."""
        if not self.rows or t_to <= t_from:
            return float("nan")
        return sum(self.at(p, t_to) - self.at(p, t_from) for p in ports) * 8 / (t_to - t_from)

    def series(self, port, t0, secs):
        """Per-second receive rate (bit/s) of one connection from t0 on, secs seconds."""
        return [(self.at(port, t0 + i + 1) - self.at(port, t0 + i)) * 8.0 for i in range(secs)]


def probe_rtt(tb, src, dst, seconds):
    """ping src -> dst 5 times a second; returns the RTTs in ms."""
    out = tb.run(src, ["ping", "-i", "0.2", "-c", str(int(seconds * 5)), "-W", "2",
                       weirtb.Testbed.addr(dst)], timeout=seconds + 20, check=False).stdout
    return [float(x) for x in re.findall(r"time=([\d.]+)", out)]


def run(tb, cfgdir, mode, rate_kBps, n, duration, limit=0, cc=None, pairs=None, probe=True):
    """One experiment: returns a dict of what was measured."""
    if mode == "htb":
        tb.start_gateway("linux-htb", htb_spec=htb_spec(rate_kBps, limit))
    else:
        os.environ["WEIR_TESTBED_CFG"] = str(config(cfgdir / f"{mode}.cfg", mode, rate_kBps,
                                                    limit))
        tb.start_gateway("weir")
    pairs = pairs or [(tb.lan_hosts[i % tb.nlan], tb.wan_hosts[i % tb.nwan]) for i in range(n)]
    rtts = []
    with Sampler(tb) as s:
        t = None
        if probe:   # a ping-like probe in the class, from the first flow's hosts
            t = threading.Thread(target=lambda: rtts.extend(
                probe_rtt(tb, pairs[0][0], pairs[0][1], duration - 4)), daemon=True)
        flows = iperf_cport(tb, pairs, duration, cc, t)
    qmean, qmax, acks = s.buffer()
    drops = gateway_counters(tb)[4]
    pa = tb.weir_stats().get("postack") if mode != "htb" else None
    # Per-second receiver reports overstate a flow after a loss: data held in
    # the receiver's out-of-order queue is all counted in the second the hole
    # fills. So goodput is what the receivers got over the whole run. The run
    # is the wall time from launching the clients until the last one exits, not
    # -t: under heavy loss a data connection's SYN can be dropped (retried after
    # 1, 3, 7 s), so flows start and end seconds apart, and the sum of each
    # flow's bytes over its own duration read up to 2x the class rate at 32
    # flows and a 3-packet limit (HTB as much as weir). The run is the longest
    # a receiver saw plus how far apart the clients exited (each client exits a
    # fixed exchange after its flow ends, so that spread is the flows' stagger).
    # A client whose test failed (its control exchange lost to a full class:
    # iperf3 gives up after its own timeouts) got nothing and exits whenever
    # it gives up; its exit says nothing about the flows' stagger.
    ends = [f.wall_end for f in flows if f.wall_end and not f.error]
    span = max([duration] + [f.seconds_received for f in flows]) + \
        (max(ends) - min(ends) if ends else 0.0)
    per_flow = [f.bytes_received * 8 / max(duration, f.seconds_received) for f in flows]
    goodput = sum(f.bytes_received for f in flows) * 8 / span
    sent = sum(f.bytes_received for f in flows) / 1448 or 1
    retr = sum((f.retransmits or 0) for f in flows)
    rtts.sort()
    return {
        "mode": mode, "flows": n, "limit": limit, "cc": cc or "",
        "goodput_kBps": goodput / 8e3, "target_kBps": rate_kBps,
        "class_kBps": s.class_rate() / 1e3,
        "jain": sum(per_flow) ** 2 / (len(per_flow) * sum(x * x for x in per_flow))
        if any(per_flow) else 0.0,
        "retx_ratio": retr / sent, "data_pkts_mean": qmean, "data_pkts_peak": qmax,
        "acks_held_peak": acks, "drops": drops,
        "probe_ms_median": rtts[len(rtts) // 2] if rtts else float("nan"),
        "probe_ms_p90": rtts[int(len(rtts) * 0.9)] if rtts else float("nan"),
        "per_flow_kBps": [round(x / 8e3, 1) for x in per_flow],
        # iperf3's own failures (its control exchange lost to WAN loss at a few
        # KB/s): the run measured nothing, which is not a goodput of zero.
        "iperf_errors": sum(1 for f in flows if f.error),
        "errors": sorted({str(f.error)[:120] for f in flows if f.error}),
        "series": [[round(v / 8e3, 1) for v in f.interval_bps] for f in flows],
        # PostACK's counters at the end (which rule let ACKs go: paced,
        # released, caught_up, limit_released...), for reading a run.
        "postack": {k: v for k, v in (pa or {}).items()
                    if k in ("held", "released", "paced", "caught_up", "flushed",
                             "idle_released", "limit_released")},
    }


_next_cport = [0]
CPORT_SPAN = 100    # client ports CPORT..CPORT+CPORT_SPAN-1 (a caller's rules must cover them)


def iperf_cport(tb, pairs, duration, cc, probe_thread, extra_args=None, kill_after=None,
                stagger=None):
    """Like weirtb.iperf_flows, with each client's data connection on a port of
    the class's range CPORT..CPORT+99. Each run takes the next ports of the range:
    a connection its client closed first holds its port in TIME_WAIT for 60 s, and
    a run reusing it at once failed to bind ("Address already in use").
    extra_args: more iperf3 client arguments (e.g. ["-M", "548"]). kill_after = (i, s):
    SIGKILL client i s seconds after the start, a client that never reports (tests of
    what a run makes of such a flow). stagger = (n, s): start the clients n at a time, s
    seconds apart (seed 000 starts 8 flows every 0.5 s); each runs `duration` from its own
    start."""
    from weirtb.traffic import _dst_addr, _wait_listening, _parse_flow
    servers, clients, out = [], [], []
    if _next_cport[0] + len(pairs) > CPORT_SPAN:
        _next_cport[0] = 0
    base = CPORT + _next_cport[0]
    _next_cport[0] += len(pairs)
    try:
        for i, (lan, wan) in enumerate(pairs):
            servers.append(tb.popen(wan, ["iperf3", "-s", "-1", "-p", str(5201 + i), "-J"]))
        for i, (lan, wan) in enumerate(pairs):
            _wait_listening(tb, wan, 5201 + i)
        t0 = time.monotonic()
        for i, (lan, wan) in enumerate(pairs):
            if stagger and i and i % stagger[0] == 0:
                time.sleep(stagger[1])
            argv = ["iperf3", "-c", _dst_addr(tb, wan), "-p", str(5201 + i), "--cport",
                    str(base + i), "-t", str(duration), "-i", "1", "-J", "--get-server-output"]
            if cc:
                argv += ["-C", cc]
            clients.append(tb.popen(lan, argv + list(extra_args or [])))
        if kill_after is not None:
            killer = threading.Timer(kill_after[1], clients[kill_after[0]].kill)
            killer.daemon = True
            killer.start()
        if probe_thread is not None:
            time.sleep(2)
            probe_thread.start()
        # Each client is waited for in its own thread so its exit time is its
        # own, not that of the client before it in the list.
        res = [None] * len(clients)

        def wait(i):
            try:
                o, e = clients[i].communicate(timeout=duration + 60)
            except subprocess.TimeoutExpired:
                # Its results never came back (a sender still held, say): killed below,
                # its receiver's figures read from its server.
                o, e = "", f"client not done {duration + 60} s after its start"
            res[i] = (o, e, time.monotonic() - t0)
        waiters = [threading.Thread(target=wait, args=(i,)) for i in range(len(clients))]
        for w in waiters:
            w.start()
        for w in waiters:
            w.join()
        for i, (lan, wan) in enumerate(pairs):
            o, e, end = res[i] or ("", "client not waited for", 0.0)
            f = _parse_flow(i, lan, wan, False, cc, o, e, 1.0)
            f.wall_end = end
            f.rx_source = "client"
            out.append(f)
        if probe_thread is not None:
            probe_thread.join()
    finally:
        for p in clients:
            if p.poll() is None:
                p.kill()
            p.communicate()
        # The servers are the receivers: a server whose client never finished (killed,
        # or its results never came back) still has its per-second intervals. SIGINT
        # makes iperf3 print its JSON (intervals included) before it exits; SIGKILL
        # lost them, and with them every byte such a flow delivered.
        srv_out = []
        for p in servers:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in servers:
            try:
                o, _ = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                o, _ = p.communicate()
            srv_out.append(o or "")
    for f, o in zip(out, srv_out):
        iv = server_intervals(o)
        if len(iv) > len(f.interval_bps):
            f.interval_bps, f.rx_source = iv, "server"
    return out


def server_intervals(text, interval=1.0):
    """The receiver's per-interval rates (bit/s) from an iperf3 server's own -J output
    (complete, or printed on SIGINT); the last sliver dropped as _parse_flow does."""
    try:
        j = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return []
    return [iv["sum"]["bits_per_second"] for iv in j.get("intervals", [])
            if iv.get("sum", {}).get("seconds", 0) >= 0.5 * interval]


def receiver_total_bps(flows, skip, secs):
    """What the receivers got over the measured window [skip, secs) s, every flow,
    finished or not (bit/s): each flow's per-second receiver intervals in the window
    summed, a missing second counting as nothing received."""
    span = max(1, secs - skip)
    return sum(sum(f.interval_bps[skip:secs]) for f in flows) / span


MODES = None   # --modes: run only these
GRID = {}      # --flows / --limits: Fig. 8's grid, when not the default


def only(modes):
    return [m for m in modes if m in MODES] if MODES else modes


def testbed(paths, nlan=2):
    for c in ("reno", "cubic", "bbr"):
        weirtb.topology.allow_congestion_control(c)
    tb = weirtb.Testbed(lan=nlan, wan=len(paths), gateway="weir", emu="wanemu", paths=paths)
    tb.claim().up()
    return tb


def write(out, name, rows, keys):
    with open(out / f"{name}.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(keys)
        for r in rows:
            w.writerow([r[k] for k in keys])


def table(rows, keys):
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(f"{r[k]:.3f}" if isinstance(r[k], float) else str(r[k]) for k in keys))


def plot(out, name, fn):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = fn(plt)
    fig.savefig(out / f"{name}.png", dpi=110, bbox_inches="tight")
    plt.close(fig)


# ----- the figures -----------------------------------------------------------------------
def fig8(out, quick, cfgdir):
    """Buffer requirement: 500 KB/s, 50 ms RTT, 1-32 flows, class queue limit 1-243."""
    flows = GRID.get("flows") or ([1, 8, 32] if quick else [1, 2, 4, 8, 16, 32])
    limits = GRID.get("limits") or ([3, 9, 27, 243] if quick else [1, 3, 9, 27, 81, 243])
    modes = only(["fifo", "tcr", "postack", "postack-paced", "htb"])
    tb = testbed([PathSpec(delay=25)])
    rows = []
    try:
        for n in flows:
            for lim in limits:
                for m in modes:
                    r = run(tb, cfgdir, m, 500, n, 14, limit=lim, cc=SENDER_CC, probe=False)
                    rows.append(r)
                    print(f"fig8 n={n} limit={lim} {m}: {r['goodput_kBps']:.0f} KB/s (class {r['class_kBps']:.0f}) "
                          f"retx {r['retx_ratio']:.4f} data {r['data_pkts_mean']:.1f}/"
                          f"{r['data_pkts_peak']} iperf3 failed {r['iperf_errors']} {r['errors']} "
                          f"per flow {r['per_flow_kBps']} postack {r['postack']}", flush=True)
    finally:
        tb.down()
    keys = ["mode", "flows", "limit", "goodput_kBps", "class_kBps", "retx_ratio",
            "data_pkts_mean", "data_pkts_peak", "acks_held_peak", "drops", "iperf_errors"]
    write(out, "fig8", rows, keys)

    plot(out, "fig8", lambda plt: draw_fig8(plt, rows))
    return rows, keys


def draw_fig8(plt, rows):
    """Goodput against the class queue limit, one panel per flow count, a line per mode
    (rows as measured or as read back from fig8.csv: `report` redraws it from there,
    so a CSV whose rows came from more than one run is plotted as it is)."""
    rows = [dict(r, flows=int(r["flows"]), limit=int(r["limit"]),
                 goodput_kBps=float(r["goodput_kBps"])) for r in rows]
    flows = sorted({r["flows"] for r in rows})
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    fig, axs = plt.subplots(1, len(flows), figsize=(4 * len(flows), 3.2), squeeze=False)
    for ax, n in zip(axs[0], flows):
        for m in modes:
            pts = sorted((r["limit"], r["goodput_kBps"]) for r in rows
                         if r["flows"] == n and r["mode"] == m)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=m)
        ax.set_xscale("log")
        ax.set_title(f"{n} flow(s)")
        ax.set_xlabel("class queue limit (packets)")
        ax.set_ylabel("goodput (KB/s)")
    axs[0][0].legend()
    return fig


def fig9(out, quick, cfgdir):
    """WAN loss: one flow in a 200 KB/s class, random loss 0-5 %."""
    losses = [0, 1, 3, 5] if quick else [0, 0.5, 1, 2, 3, 4, 5]
    modes = only(["pfq", "tcr", "postack", "postack-paced", "htb"])
    rows = []
    for loss in losses:
        tb = testbed([PathSpec(delay=25, loss=loss)])
        try:
            for m in modes:
                r = run(tb, cfgdir, m, 200, 1, 24, cc=SENDER_CC, probe=False)
                r["loss_pct"] = loss
                rows.append(r)
                print(f"fig9 loss={loss}% {m}: {r['goodput_kBps']:.1f} KB/s", flush=True)
        finally:
            tb.down()
    keys = ["mode", "loss_pct", "goodput_kBps", "retx_ratio", "data_pkts_mean", "acks_held_peak"]
    write(out, "fig9", rows, keys)

    def draw(plt):
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for m in modes:
            ax.plot(*zip(*[(r["loss_pct"], r["goodput_kBps"]) for r in rows if r["mode"] == m]),
                    marker="o", label=m)
        ax.set_xlabel("random WAN loss (%)")
        ax.set_ylabel("goodput (KB/s)")
        ax.legend()
        return fig
    plot(out, "fig9", draw)
    return rows, keys


def jain_windows(series, width=10, skip=4):
    """The lowest Jain index of the flows' goodput over consecutive `width`-second
    windows after the first `skip` seconds (slow start), from per-second receiver
    reports: the issue's "over 10 s windows"."""
    n = min(len(s) for s in series) if series else 0
    worst = None
    for a in range(skip, n - width + 1, width):
        x = [sum(s[a:a + width]) for s in series]
        if any(x):
            j = sum(x) ** 2 / (len(x) * sum(v * v for v in x))
            worst = j if worst is None else min(worst, j)
    return worst if worst is not None else 0.0


def fig10(out, quick, cfgdir):
    """Fairness: three flows on 10, 50 and 150 ms paths in a 200 KB/s class."""
    modes = only(["fifo", "tcr", "postack", "postack-paced", "htb"] if quick else ["fifo", "pfq", "tcr", "postack", "postack-paced", "htb"])
    tb = testbed(weirtb.paper_paths(3))
    rows = []
    try:
        for m in modes:
            r = run(tb, cfgdir, m, 200, 3, 24, cc=SENDER_CC)
            rows.append(r)
            print(f"fig10 {m}: per flow {r['per_flow_kBps']} KB/s, Jain {r['jain']:.4f}, "
                  f"probe {r['probe_ms_median']:.1f} ms", flush=True)
    finally:
        tb.down()
    for r in rows:
        r["jain_10s_min"] = jain_windows(r["series"])
    keys = ["mode", "goodput_kBps", "jain", "jain_10s_min", "per_flow_kBps", "data_pkts_mean",
            "data_pkts_peak", "acks_held_peak", "probe_ms_median", "probe_ms_p90"]
    write(out, "fig10", rows, keys)

    def draw(plt):
        fig, axs = plt.subplots(1, len(rows), figsize=(4 * len(rows), 3.2), squeeze=False)
        for ax, r in zip(axs[0], rows):
            for i, s in enumerate(r["series"]):
                ax.plot(range(1, len(s) + 1), s, label=f"{(10, 50, 150)[i]} ms")
            ax.set_title(r["mode"])
            ax.set_xlabel("s")
            ax.set_ylabel("goodput (KB/s)")
        axs[0][0].legend()
        return fig
    plot(out, "fig10", draw)
    return rows, keys


def fig11(out, quick, cfgdir):
    """Robustness: 10 KB/s with periodic loss 1/40, 100 KB/s with 1/100; reno, cubic, bbr."""
    cases = [(10, 40), (100, 100)]
    ccs = ["reno", "cubic", "bbr"]
    modes = only(["tcr", "postack", "postack-paced", "htb"])
    rows = []
    for rate, every in cases:
        tb = testbed([PathSpec(delay=25, ploss=every)])
        try:
            for cc in ccs:
                for m in modes:
                    r = run(tb, cfgdir, m, rate, 1, 16 if quick else 30, cc=cc, probe=False)
                    r["period"] = every
                    r["ratio"] = r["goodput_kBps"] / rate
                    rows.append(r)
                    print(f"fig11 {rate} KB/s 1/{every} {cc} {m}: {r['goodput_kBps']:.2f} KB/s "
                          f"({r['ratio']:.3f} of target)", flush=True)
        finally:
            tb.down()
    keys = ["mode", "cc", "target_kBps", "period", "goodput_kBps", "ratio", "class_kBps",
            "retx_ratio", "iperf_errors"]
    write(out, "fig11", rows, keys)

    def draw(plt):
        fig, axs = plt.subplots(1, 2, figsize=(9, 3.2))
        for ax, (rate, every) in zip(axs, cases):
            sub = [r for r in rows if r["target_kBps"] == rate]
            for j, m in enumerate(modes):
                w = 0.8 / len(modes)
                ax.bar([i + w * j for i in range(len(ccs))],
                       [next(r["ratio"] for r in sub if r["cc"] == c and r["mode"] == m) for c in ccs],
                       width=w, label=m)
            ax.set_xticks([i + 0.4 - 0.4 / len(modes) for i in range(len(ccs))], ccs)
            ax.axhline(1.0, color="k", lw=0.5)
            ax.set_title(f"{rate} KB/s, loss 1/{every}")
            ax.set_ylabel("goodput / target")
        axs[0].legend()
        return fig
    plot(out, "fig11", draw)
    return rows, keys


# ----- the results document ---------------------------------------------------------------
def _read(out, name):
    path = out / f"{name}.csv"
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _md(rows, cols, fmt=None):
    fmt = fmt or {}
    lines = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for _, k in cols:
            v = r.get(k) or "-"     # a column older CSVs do not have
            try:
                v = fmt.get(k, "{:.1f}").format(float(v)) if k in fmt or "." in v else v
            except ValueError:
                pass
            cells.append(v)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(out, quick):
    """DIR/paper.md: every figure's table, the issue's targets checked, and the
    command that regenerates it all."""
    cmd = f"scripts/paper_experiments.py all{' --quick' if quick else ''} --out {out.relative_to(REPO) if out.is_relative_to(REPO) else out}"
    doc = ["# The PostACK paper's experiments with real Linux TCP", "",
           "Generated by `scripts/paper_experiments.py` from the CSV files beside this one; "
           "plots are `figN.png`. Regenerate (as root; about 25 minutes with --quick, 2 hours without; "
           "one figure: `figN` instead of `all`, and `report` rewrites this file from the CSVs):", "",
           f"    {cmd}", "",
           "weir runs one experiment class (`exp`) in each mode; `htb` is Linux HTB with a pfifo "
           "leaf of the same limit in weir's place. Goodput is the bytes each receiver (iperf3) got over the whole run (slow start included); "
           "data buffered is the class's queued packets sampled every 0.2 s (weir's stats file, "
           "or tc for HTB); ACKs held are PostACK's records. Senders use cubic except in Fig. 11. "
           "Discussion: `docs/postack.md`.", ""]
    f8 = _read(out, "fig8")
    if f8:
        plot(out, "fig8", lambda plt: draw_fig8(plt, f8))
        doc += ["## Fig. 8: buffer requirement (500 KB/s, 50 ms RTT)", "",
                _md(f8, [("mode", "mode"), ("flows", "flows"), ("limit", "limit"),
                         ("goodput KB/s", "goodput_kBps"), ("class KB/s (wire)", "class_kBps"),
                         ("retx ratio", "retx_ratio"),
                         ("data pkts mean", "data_pkts_mean"), ("data pkts peak", "data_pkts_peak"),
                         ("ACKs held peak", "acks_held_peak"), ("drops", "drops")],
                    {"goodput_kBps": "{:.0f}", "class_kBps": "{:.0f}", "retx_ratio": "{:.4f}",
                     "data_pkts_mean": "{:.1f}"}), ""]
        # A receiver can never get more payload than the class sent on the wire.
        over = [r for r in f8 if float(r.get("class_kBps") or 0) > 0 and
                float(r["goodput_kBps"]) > 1.02 * float(r["class_kBps"])]
        if over:
            doc += ["Rows whose goodput is above what the class sent (accounting to look into): "
                    + ", ".join(f"{r['mode']} at {r['flows']} flows, limit {r['limit']} "
                                f"({float(r['goodput_kBps']):.0f} of {float(r['class_kBps']):.0f} KB/s)"
                                for r in over) + ".", ""]
        n = max(int(r["flows"]) for r in f8)
        full = 500 * PAYLOAD_SHARE
        doc += [f"Target: full goodput (90 % or more of the {full:.0f} KB/s a 500 KB/s class "
                f"carries as TCP payload, 1448 of every 1538 bytes on the wire, under 5 % "
                f"retransmitted) with under 10 data packets buffered at {n} flows (the best "
                "limit per mode):", ""]
        for m in ("tcr", "postack", "postack-paced", "fifo", "htb"):
            sub = [r for r in f8 if r["mode"] == m and int(r["flows"]) == n and
                   0.9 * full <= float(r["goodput_kBps"]) <= 1.02 * 500 and
                   float(r["retx_ratio"]) < 0.05]
            if sub:
                best = min(sub, key=lambda r: float(r["data_pkts_mean"]))
                doc.append(f"- {m}: {float(best['goodput_kBps']):.0f} KB/s with "
                           f"{float(best['data_pkts_mean']):.1f} packets buffered on average "
                           f"(limit {best['limit']}): "
                           f"{'met' if float(best['data_pkts_mean']) < 10 else 'not met'}")
            else:
                doc.append(f"- {m}: no limit reached 90 % of that with under 5 % retransmitted")
        doc.append("")
        lim = max(int(r["limit"]) for r in f8)
        doc += [f"Peak gateway memory at {n} flows, limit {lim}: data packets at "
                f"{MBUF_BYTES:,} bytes (a default mbuf) plus ACKs held at {ACK_RECORD_BYTES} "
                "(a record; while fewer than `postack.mbufs` are held they keep their own mbufs "
                "from the pool instead, which costs no memory beyond the pool's):", ""]
        for r in f8:
            if int(r["flows"]) == n and int(r["limit"]) == lim:
                kb = (int(r["data_pkts_peak"]) * MBUF_BYTES +
                      int(r["acks_held_peak"]) * ACK_RECORD_BYTES) / 1024
                doc.append(f"- {r['mode']}: {r['data_pkts_peak']} packets + "
                           f"{r['acks_held_peak']} ACKs = {kb:.0f} KiB")
        doc.append("")
    f9 = _read(out, "fig9")
    if f9:
        doc += ["## Fig. 9: WAN loss (one flow, 200 KB/s, 50 ms)", "",
                _md(f9, [("mode", "mode"), ("loss %", "loss_pct"), ("goodput KB/s", "goodput_kBps"),
                         ("retx ratio", "retx_ratio"), ("data pkts mean", "data_pkts_mean"),
                         ("ACKs held peak", "acks_held_peak")],
                    {"goodput_kBps": "{:.1f}", "retx_ratio": "{:.4f}", "loss_pct": "{:g}"}), ""]
    f10 = _read(out, "fig10")
    if f10:
        doc += ["## Fig. 10: fairness (10, 50, 150 ms paths, 200 KB/s)", "",
                _md(f10, [("mode", "mode"), ("goodput KB/s", "goodput_kBps"), ("Jain", "jain"),
                          ("Jain 10 s min", "jain_10s_min"),
                          ("per flow KB/s", "per_flow_kBps"), ("data pkts mean", "data_pkts_mean"),
                          ("data pkts peak", "data_pkts_peak"), ("ACKs held peak", "acks_held_peak"),
                          ("probe ms median", "probe_ms_median"), ("probe ms p90", "probe_ms_p90")],
                    {"jain": "{:.4f}", "jain_10s_min": "{:.4f}", "goodput_kBps": "{:.1f}"}), "",
                "Target: Jain >= 0.98 over 10 s windows (the lowest of the run's windows after "
                "its first 4 s; over the whole run in brackets): " +
                ", ".join(f"{r['mode']} {float(r.get('jain_10s_min') or 0):.3f} "
                          f"({float(r['jain']):.3f})" for r in f10), ""]
    f11 = _read(out, "fig11")
    if f11:
        doc += ["## Fig. 11: robustness (periodic loss; reno, cubic, bbr)", "",
                _md(f11, [("mode", "mode"), ("sender", "cc"), ("target KB/s", "target_kBps"),
                          ("loss 1/N", "period"), ("goodput KB/s", "goodput_kBps"),
                          ("of target", "ratio"), ("class KB/s (wire)", "class_kBps"),
                          ("retx ratio", "retx_ratio"), ("iperf3 failed", "iperf_errors")],
                    {"ratio": "{:.3f}", "goodput_kBps": "{:.2f}", "class_kBps": "{:.2f}",
                     "retx_ratio": "{:.4f}"}), "",
                "Target: postack within 10 % of the target rate for every sender: " +
                ", ".join(f"{r['cc']} {r['target_kBps']} KB/s {float(r['ratio']):.2f}"
                          for r in f11 if r["mode"] == "postack"), "",
                "The most a class can give as goodput under periodic loss 1/N is its rate x "
                f"{PAYLOAD_SHARE:.3f} (1448 bytes of payload per 1538 on the wire) x (1 - 1/N): "
                + ", ".join(f"{1 - 1 / n:.3f} x {PAYLOAD_SHARE:.3f} = {PAYLOAD_SHARE * (1 - 1 / n):.3f} "
                            f"of the target at 1/{n}" for n in sorted({int(r["period"]) for r in f11}))
                + ". `class KB/s` is what the class sent on the wire (weir's class byte counter "
                "with 24 bytes a frame, or tc's for HTB, which counts no preamble, FCS or gap: "
                "HTB's class carries 1538/1514 = 1.6 % more for the same rate, and its ceiling "
                "is 1448/1514 of it).", ""]
    (out / "paper.md").write_text("\n".join(doc))
    print(f"wrote {out / 'paper.md'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fig", choices=["fig8", "fig9", "fig10", "fig11", "all", "report"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(REPO / "docs" / "results"))
    ap.add_argument("--modes", help="comma-separated: run only these modes (e.g. postack-paced)")
    ap.add_argument("--flows", help="Fig. 8: comma-separated flow counts")
    ap.add_argument("--limits", help="Fig. 8: comma-separated class queue limits")
    a = ap.parse_args()
    for k in ("flows", "limits"):
        if getattr(a, k):
            GRID[k] = [int(x) for x in getattr(a, k).split(",")]
    global MODES
    MODES = a.modes.split(",") if a.modes else None
    out = Path(a.out).resolve()
    if a.fig == "report":
        report(out, a.quick)
        return
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces)")
    out.mkdir(parents=True, exist_ok=True)
    cfgdir = Path("/tmp/weir-paper")
    cfgdir.mkdir(exist_ok=True)
    for name in (["fig8", "fig9", "fig10", "fig11"] if a.fig == "all" else [a.fig]):
        rows, keys = globals()[name](out, a.quick, cfgdir)
        print(f"\n== {name} ==")
        table(rows, keys)
    report(out, a.quick)


if __name__ == "__main__":
    main()

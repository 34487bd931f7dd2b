"""Two workers in the testbed, with real Linux TCP (issue 18 item 2).

weir runs 2 workers on af_packet ports with qpairs=2: the kernel's PACKET_FANOUT
hash (symmetric) spreads flows over the two queues of each port, and
ports.distribution = "kernel-fanout" lets weir rely on it (scripts/weirtb/config.py,
testbed_config_text(workers=2); the management lcore and both workers float over the
machine's 2 vCPUs and the workers sleep when idle).

Which worker a flow lands on is the kernel's hash of its 4-tuple (seeded at boot), so
the tests first probe: a SYN from a chosen LAN port to the iperf3 server's port,
refused by the WAN host's RST, leaves a closed flow in one worker's table, and the
REST flow list says which. That probe is also the symmetry measurement: the SYN came
in on the LAN port and the RST on the WAN port, and both must be counted in one entry
of one worker. The real flow then uses that LAN port (iperf3 --cport).

Every test also checks flow_split == 0 (frames of a TCP flow reaching a worker that
never saw its SYN).
"""
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "test" / "py"))

import weirtb  # noqa: E402
from conftest import measure_twice, weir_testbed  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.traffic import PYTHON, _dst_addr, default_pairs, steady_bps  # noqa: E402
from test_classes import Sampler, jain  # noqa: E402

# WEIR_MW_WORKERS=3 runs the same tests with 3 workers (flows still placed on
# workers 0 and 1; the third holds iperf3's control connections and probes).
WORKERS = int(os.environ.get("WEIR_MW_WORKERS", "2"))
MGMT_PORT = 8097
LINK, GOLD, BULK = 30e6, 20e6, 10e6
GOLD_PORT, BULK_PORT, PA_PORT = 5201, 5301, 5305
STATS_INTERVAL = 0.2
WEIRCTL = REPO / "scripts" / "weirctl"

# Run in a LAN host: one TCP connection attempt per LAN port, to a port where
# nothing listens yet (the WAN host answers RST).
PROBE = r"""
import socket, sys
dst, dport = sys.argv[1], int(sys.argv[2])
for p in map(int, sys.argv[3:]):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", p))
    s.settimeout(2)
    try:
        s.connect((dst, dport))
    except OSError:
        pass
    s.close()
"""


def mw_config(path, body_file=None, body="", workers=WORKERS):
    if body_file:
        body = weirtb.conf_body(body_file)
    path.write_text(weirtb.testbed_config_text(
        body + f"\nmanagement = {{ port = {MGMT_PORT}; }};\n",
        stats_interval=STATS_INTERVAL, workers=workers))
    return path


@pytest.fixture(scope="module")
def mw_tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("multiworker")
    cfg = mw_config(d / "twoclass.cfg", body_file="testbed-twoclass.cfg")
    # Equal 10 ms RTT paths: this checks the workers, not TCP's RTT bias.
    with weir_testbed(cfg, lan=2, wan=2, paths=[PathSpec(delay=5), PathSpec(delay=5)]) as tb:
        tb.cfg_dir, tb.cfg = d, cfg
        yield tb


def restart(tb, cfg):
    os.environ["WEIR_TESTBED_CFG"] = str(cfg)
    tb.start_gateway("weir")


def api(tb, path):
    cp = tb.run("gw", ["curl", "-sf", f"http://127.0.0.1:{MGMT_PORT}{path}"])
    return json.loads(cp.stdout)


def all_flows(tb):
    out, cursor = [], 0
    while cursor is not None:
        r = api(tb, f"/api/v1/flows?limit=1000&cursor={cursor}")
        out += r["flows"]
        cursor = r["next"]
    return out


def split_frames(st):
    return sum(p["flow_split"] for p in st["ports"].values())


def probe(tb, targets):
    """targets: [(lan host, wan host, wan port, [LAN ports])]. Returns
    {(lan addr, lan port, wan addr, wan port): [flow entries]} for every probe."""
    for lan, wan, dport, cports in targets:
        tb.run(lan, [PYTHON, "-c", PROBE, _dst_addr(tb, wan), str(dport)] + [str(p) for p in cports])
    want = {(tb.addr(lan), p, tb.addr(wan), dport)
            for lan, wan, dport, cports in targets for p in cports}
    seen = {k: [] for k in want}
    for f in all_flows(tb):
        k = (f["lan"]["addr"], f["lan"]["port"], f["wan"]["addr"], f["wan"]["port"])
        if k in seen and f["proto"] == "tcp":
            seen[k].append(f)
    return seen


def pick_cports(tb, flows, base=20000):
    """flows: [(lan host, wan host, wan port, wanted worker)]. Probes 12 LAN
    ports per flow and returns, per flow, one whose 4-tuple the kernel's hash
    puts on the wanted worker."""
    targets = [(lan, wan, dport, list(range(base + 100 * i, base + 100 * i + 12)))
               for i, (lan, wan, dport, _) in enumerate(flows)]
    seen = probe(tb, targets)
    picked = []
    for (lan, wan, dport, w), (_, _, _, cports) in zip(flows, targets):
        ok = [p for p in cports if [e["worker"] for e in seen[(tb.addr(lan), p, tb.addr(wan), dport)]] == [w]]
        assert ok, f"no LAN port of {cports} maps to worker {w}"
        picked.append(ok[0])
    return picked


def test_fanout_is_symmetric(mw_tb):
    """64 TCP 4-tuples (SYN in on the LAN port, RST back on the WAN port) and one
    ping flow: each lands in one worker's table with both directions counted."""
    tb = mw_tb
    st0 = tb.weir_stats()
    targets = [("l1", "w1", GOLD_PORT, list(range(30000, 30032))),
               ("l2", "w2", BULK_PORT, list(range(30100, 30132)))]
    seen = probe(tb, targets)
    per_worker = [0] * WORKERS
    bad = []
    for k, entries in seen.items():
        if len(entries) != 1 or entries[0]["out"]["pkts"] < 1 or entries[0]["in"]["pkts"] < 1:
            bad.append((k, [(e["worker"], e["out"]["pkts"], e["in"]["pkts"]) for e in entries]))
        for e in entries:
            per_worker[e["worker"]] += 1
    ping = tb.ping("l1", "w1", count=20, interval=0.05)
    # (the testbed's own start-up ping is another, older ICMP flow)
    icmp = [f for f in all_flows(tb) if f["proto"] in ("icmp", 1) and f["age_s"] < 1.5]
    st = tb.weir_stats()
    print(f"64 TCP probes: per worker {per_worker}, split or one-way {len(bad)} {bad[:4]}; "
          f"ping {ping.received}/{ping.sent}: entries "
          f"{[(f['worker'], f['out']['pkts'], f['in']['pkts']) for f in icmp]}; "
          f"flow_split {split_frames(st) - split_frames(st0)}; per worker "
          f"{[w['flow_split'] for w in st['workers']]}")
    assert not bad, bad
    assert min(per_worker) >= 12, per_worker        # both queues used (binomial 64, p = 1/2)
    assert ping.ok
    assert len(icmp) == 1 and icmp[0]["out"]["pkts"] >= 20 and icmp[0]["in"]["pkts"] >= 20, icmp
    assert split_frames(st) == 0, st["ports"]


def flows_on_workers(tb, gold_w, bulk_w):
    pairs = default_pairs(tb, 4)
    gold = pick_cports(tb, [(l, w, GOLD_PORT + i, gold_w[i]) for i, (l, w) in enumerate(pairs)])
    bulk = pick_cports(tb, [(l, w, BULK_PORT + i, bulk_w[i]) for i, (l, w) in enumerate(pairs)],
                       base=21000)
    return gold, bulk


@pytest.mark.parametrize("reverse", [False, True], ids=["outbound", "inbound"])
def test_class_rates_with_flows_uneven_over_workers(mw_tb, reverse):
    """gold (20 of 30 Mbit/s): 3 flows on worker 0, 1 on worker 1; bulk (10): 1 on
    worker 0, 3 on worker 1. The rebalancer must hold each class's total and share it
    evenly among its flows wherever they run; REST and weirctl list both workers'."""
    tb = mw_tb
    direction = "inbound" if reverse else "outbound"
    dur = 16
    gold_w, bulk_w = [0, 0, 0, 1], [1, 1, 1, 0]
    listed = {}

    def run():
        gold_c, bulk_c = flows_on_workers(tb, gold_w, bulk_w)
        with Sampler(tb, direction) as s:
            t_start = s.now()
            res = {}
            threads = [threading.Thread(target=lambda k, kw: res.__setitem__(k, tb.iperf(**kw)),
                                        args=(k, kw), daemon=True) for k, kw in (
                ("gold", dict(n=4, duration=dur, reverse=reverse, base_port=GOLD_PORT, cports=gold_c)),
                ("bulk", dict(n=4, duration=dur, reverse=reverse, base_port=BULK_PORT, cports=bulk_c)))]
            for t in threads:
                t.start()
            s.wait_until(t_start + 8)
            listed["rest"] = all_flows(tb)
            listed["ctl"] = tb.run("gw", [PYTHON, str(WEIRCTL), "--url",
                                          f"http://127.0.0.1:{MGMT_PORT}", "flows"]).stdout
            for t in threads:
                t.join()
        t0 = t_start + 4
        return s, res, s.rate("gold", t0, t0 + 10), s.rate("bulk", t0, t0 + 10)

    s, res, gold, bulk = measure_twice(
        run, lambda r: abs(r[2] / GOLD - 1) <= 0.03 and abs(r[3] / BULK - 1) <= 0.03)
    fair = {}
    for key in ("gold", "bulk"):
        assert all(f.error is None for f in res[key]), [f.error for f in res[key]]
        steady = [steady_bps(f.interval_bps, 4, 14) for f in res[key]]
        fair[key] = (jain(steady), [round(x / 1e6, 2) for x in steady])
    st = tb.weir_stats()
    data = [f for f in listed["rest"] if f["wan"]["port"] in
            {GOLD_PORT + i for i in range(4)} | {BULK_PORT + i for i in range(4)}
            and f["state"] == "established"]
    by_worker = {w: sorted((f["out"]["class"], f["lan"]["port"]) for f in data if f["worker"] == w)
                 for w in range(WORKERS)}
    ctl_lines = [l for l in listed["ctl"].splitlines() if l.startswith("tcp")]
    print(f"{direction}: gold {gold / 1e6:.2f} Mbit/s (20), bulk {bulk / 1e6:.2f} (10); "
          f"Jain/steady Mbit/s {fair}; flows listed per worker {by_worker}; weirctl flows "
          f"lines {len(ctl_lines)}; flow_split {split_frames(st)}; workers "
          f"{[(w['flows_active'], w['rate_updates'], round(w['busy_s'], 2)) for w in st['workers']]}")
    assert abs(gold / GOLD - 1) <= 0.03, gold
    assert abs(bulk / BULK - 1) <= 0.03, bulk
    for key in ("gold", "bulk"):
        assert fair[key][0] >= 0.99, (key, fair[key])
    # Each worker's table, as REST lists it, holds the flows the probe put there
    # (plus iperf3's control connections, which are not "established" data here
    # only when idle; count the data connections by their LAN port).
    for w in range(WORKERS):
        classes = [c for c, _ in by_worker[w]]
        assert classes.count("gold") >= gold_w.count(w) and classes.count("bulk") >= bulk_w.count(w), by_worker
    assert len(ctl_lines) >= 8, listed["ctl"]
    # weirctl's WORKER column (last) shows both workers' data flows.
    ctl_workers = {l.split()[-1] for l in ctl_lines
                   if any(f":{p}" in l for p in range(GOLD_PORT, GOLD_PORT + 4))}
    assert {"0", "1"} <= ctl_workers, listed["ctl"]   # (iperf3's control connections anywhere)
    assert split_frames(st) == 0, st["ports"]


@pytest.mark.parametrize("mode", ["postack", "tcr"])
def test_postack_per_worker(mw_tb, mode):
    """PostACK (and TCR), one 10 Mbit/s class each way, 4 uploads (3 on worker 0, 1 on
    worker 1): each worker holds ACKs of its own flows; goodput and fairness as with one
    worker."""
    tb = mw_tb
    cfg = tb.cfg_dir / f"{mode}.cfg"
    cfg.write_text(weirtb.testbed_config_text(
        f'shaping = {{ mode = "{mode}"; outbound = "10mbit"; inbound = "10mbit"; aqm = "codel"; }};\n'
        f"management = {{ port = {MGMT_PORT}; }};\n",
        stats_interval=STATS_INTERVAL, workers=WORKERS))
    restart(tb, cfg)
    try:
        want = [0, 0, 0, 1]
        pairs = default_pairs(tb, 4)
        cports = pick_cports(tb, [(l, w, PA_PORT + i, want[i]) for i, (l, w) in enumerate(pairs)],
                             base=22000)
        held = {w: 0 for w in range(WORKERS)}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                for f in all_flows(tb):
                    if f["wan"]["port"] in {PA_PORT + i for i in range(4)}:
                        held[f["worker"]] = max(held[f["worker"]], f["out"].get("acks_held", 0))
                time.sleep(0.3)

        t = threading.Thread(target=sample, daemon=True)
        time.sleep(0.1)
        t.start()
        flows = tb.iperf(n=4, duration=14, base_port=PA_PORT, cports=cports)
        stop.set()
        t.join()
        st = tb.weir_stats()
    finally:
        restart(tb, tb.cfg)
    assert all(f.error is None for f in flows), [f.error for f in flows]
    steady = [steady_bps(f.interval_bps, 4, 14) for f in flows]
    print(f"{mode}, {WORKERS} workers: {sum(steady) / 1e6:.2f} Mbit/s, Jain {jain(steady):.4f} "
          f"{[round(x / 1e6, 2) for x in steady]}; peak ACKs held per worker {held}; "
          f"postack {st['postack']}; flow_split {split_frames(st)}")
    # TCR sizes windows and paces ACKs: 7.9-8.3 Mbit/s here with 2 workers at the 1 ms
    # bucket depth, 9.26 at the testbed's 5 ms for several workers (docs/results/workers).
    assert sum(steady) >= (0.9 if mode == "postack" else 0.7) * 10e6, steady
    assert jain(steady) >= 0.99, steady
    # The workers the flows were put on: each held ACKs of its own. TCR
    # holds few at a time (its windows do most of the work: a 0.3 s sample
    # of acks_held saw none on worker 1 in a CI run), so the check is the
    # workers' running counts.
    per = {w: st["workers"][w]["postack"]["held"] for w in range(2)}
    print(f"ACKs held in all per worker {per}")
    assert per[0] > 0 and per[1] > 0, (per, held)
    if mode == "postack":
        assert held[0] > 0 and held[1] > 0, held
    assert split_frames(st) == 0, st["ports"]


def test_reload_under_traffic_two_workers(mw_tb):
    """Four bulk uploads, two per worker, borrowing the idle link; SIGHUP caps bulk at
    10 Mbit/s: both workers take the new policy, nothing is dropped by the switch."""
    tb = mw_tb
    text = tb.cfg.read_text()
    capped = text.replace('{ name = "bulk"; rate = "10mbit"; ceil = "30mbit"; prio = 1; }',
                          '{ name = "bulk"; rate = "10mbit"; ceil = "10mbit"; prio = 1; }')
    assert capped != text
    pairs = default_pairs(tb, 4)
    cports = pick_cports(tb, [(l, w, BULK_PORT + i, i % 2) for i, (l, w) in enumerate(pairs)],
                         base=23000)
    epoch = tb.weir_stats()["policy"]["epoch"]
    try:
        with Sampler(tb, "outbound") as s:
            t0 = s.now()
            res = {}
            th = threading.Thread(target=lambda: res.__setitem__("bulk", tb.iperf(
                n=4, duration=12, base_port=BULK_PORT, cports=cports)), daemon=True)
            th.start()
            s.wait_until(t0 + 6)
            before = s.rate("bulk", t0 + 3, t0 + 6)
            st0 = tb.weir_stats()
            tb.cfg.write_text(capped)
            tb.signal_gateway(signal.SIGHUP)
            end = time.time() + 5
            while time.time() < end and tb.weir_stats()["policy"]["epoch"] == epoch:
                time.sleep(0.1)
            st = tb.weir_stats()
            s.wait_until(st["uptime_s"] + 3)
            after = s.rate("bulk", st["uptime_s"] + 1, st["uptime_s"] + 3)
            st1 = tb.weir_stats()
            th.join()
    finally:
        tb.cfg.write_text(text)
    drops = sum(p["dropped"] + p["tx_full"] for p in st1["ports"].values()) - \
        sum(p["dropped"] + p["tx_full"] for p in st0["ports"].values())
    flows = res["bulk"]
    print(f"bulk before {before / 1e6:.2f} Mbit/s (borrowing), after the reload "
          f"{after / 1e6:.2f} (ceil 10); dropped across the switch {drops}; retransmits "
          f"{[f.retransmits for f in flows]}; policy {st1['policy']}; flow_split {split_frames(st1)}")
    assert all(f.error is None for f in flows), [f.error for f in flows]
    assert st["policy"]["epoch"] == epoch + 1 and st1["policy"]["reload_failures"] == 0
    assert before >= 0.9 * LINK, before
    assert abs(after / 10e6 - 1) <= 0.05, after
    assert drops == 0, drops
    assert split_frames(st1) - split_frames(st0) == 0, (split_frames(st0), split_frames(st1))
    # back to the module's policy for the tests after this one
    tb.signal_gateway(signal.SIGHUP)


def test_new_flow_on_another_worker(mw_tb):
    """What the rebalancer's 10 ms costs a new flow. One 20 Mbit/s class each way;
    downloads (measured at the receiver, 0.1 s intervals); flow A runs alone on worker 0 (the rebalancer gives worker 1 only its 2 % floor); then flow B
    starts, either on worker 0 (DRR shares at once) or on worker 1 (its worker's part
    grows as the EWMA of demand sees B backlogged, 10 ms a step). Measured: B's bytes
    in its first 1 s and the time until a 0.1 s interval reaches 80 % of its share."""
    tb = mw_tb
    cfg = tb.cfg_dir / "oneclass.cfg"
    cfg.write_text(weirtb.testbed_config_text(
        'shaping = { outbound = "20mbit"; inbound = "20mbit"; };\n'
        f"management = {{ port = {MGMT_PORT}; }};\n",
        stats_interval=STATS_INTERVAL, workers=WORKERS))
    restart(tb, cfg)
    reps = 3
    res = {"same": [], "other": []}
    try:
        plan = []
        for r in range(reps):
            for case, wb in (("same", 0), ("other", 1)):
                plan.append((case, 5320 + 2 * len(plan), wb))
        a_ports = pick_cports(tb, [("l1", "w1", p, 0) for _, p, _ in plan], base=24000)
        b_ports = pick_cports(tb, [("l2", "w2", p + 1, wb) for _, p, wb in plan], base=26000)
        for (case, port, _), ca, cb in zip(plan, a_ports, b_ports):
            got = {}
            ta = threading.Thread(target=lambda: got.__setitem__("a", tb.iperf(
                n=1, duration=6, reverse=True, base_port=port, pairs=[("l1", "w1")],
                cports=[ca])), daemon=True)
            ta.start()
            time.sleep(3)
            # Downloads: the receiver is the iperf3 client, whose intervals are 0.1 s.
            b = tb.iperf(n=1, duration=2, reverse=True, base_port=port + 1, pairs=[("l2", "w2")],
                         cports=[cb], interval=0.1)[0]
            ta.join()
            assert b.error is None and got["a"][0].error is None, (b.error, got["a"][0].error)
            iv = b.interval_bps
            t80 = next(((i + 1) * 0.1 for i, x in enumerate(iv) if x >= 0.8 * 10e6), None)
            res[case].append((round(sum(iv[:10]) * 0.1 / 8 / 1e3), t80,
                              [round(x / 1e6, 1) for x in iv[:10]]))
        st = tb.weir_stats()
        odd = [(f["worker"], f["lan"]["port"], f["wan"]["port"], f["state"], f["out"]["pkts"],
                f["in"]["pkts"]) for f in all_flows(tb) if f["proto"] == "tcp" and
               (f["out"]["pkts"] == 0 or f["in"]["pkts"] == 0)]
    finally:
        restart(tb, tb.cfg)
    print(f"new flow B next to A: B's kB in its first 1 s, s until a 0.1 s interval "
          f"reached 80 % of its 10 Mbit/s share, its first ten 0.1 s intervals (Mbit/s): "
          f"{res}; flow_split {split_frames(st)} per worker "
          f"{[w['flow_split'] for w in st['workers']]}; one-way TCP entries {odd}")
    med = {k: sorted(x[0] for x in v)[len(v) // 2] for k, v in res.items()}
    assert all(x[1] is not None for v in res.values() for x in v), res
    assert split_frames(st) == 0
    # B on its class's worker gets its share at once (the new-flows list
    # even gives it more: 590-670 kB in its first 0.5 s). On the idle
    # worker the rebalancer's rounds (10 ms, EWMA gain 1/4: ~40 ms to most
    # of the share) are not all of it: in about half the runs B leaves its
    # queue empty for 40-60 ms at a time in its first 0.5 s, its demand then
    # reads 0 and its worker's part falls back (the management lcore's log of
    # x per worker, 2026-11-27). B then carries 390-450 kB in its first
    # 0.5 s, 80 % of its share from 0.5-0.6 s, then its share. Bound: the
    # first second costs B at most a quarter of what it carries on A's worker.
    assert med["other"] >= 0.75 * med["same"], med
    assert all(x[1] <= 1.0 for v in res.values() for x in v), res

@pytest.mark.parametrize("mode", ["tcr", "ipabr"])
def test_window_mode_bulk_beside_light_flow(mw_tb, mode):
    """A window-sizing mode (tcr, ipabr), one 10 Mbit/s class each way, two workers:
    one bulk download on worker 0 and, on worker 1, a light connection (64 bytes each
    way every 0.1 s) that counts as a sending flow there but uses next to nothing. The
    rebalancer must give worker 0 nearly the whole class (median part >= 0.95), and the
    download must carry >= 0.95 of the class on the wire and >= 0.9 of it in goodput
    (of the 10 Mbit/s of frames, 1448 / 1514 is payload). Counted by sending flows,
    each worker got half (parts 0.50-0.51, 4.8-5.0 Mbit/s on the wire)."""
    tb = mw_tb
    cfg = tb.cfg_dir / f"light-{mode}.cfg"
    cfg.write_text(weirtb.testbed_config_text(
        f'shaping = {{ mode = "{mode}"; outbound = "10mbit"; inbound = "10mbit"; }};\n'
        f"management = {{ port = {MGMT_PORT}; }};\n",
        stats_interval=STATS_INTERVAL, workers=WORKERS))
    restart(tb, cfg)
    dur, tries = 14, 3
    # a fresh pair of 4-tuples per try (measure_twice): bulk on 0, light on 1
    ports = [(5330 + 2 * k, 5331 + 2 * k) for k in range(tries)]
    runs = []

    def run():
        bulk_port, light_port = ports[len(runs)]
        cb, cl = picked[len(runs)]
        # a light connection (64 bytes each way every 0.1 s): it counts as a
        # sending flow on worker 1 and uses next to nothing
        with weirtb.traffic.LightConnection(tb, "l2", "w2", light_port, cl, dur + 2) as light:
            time.sleep(1)
            with Sampler(tb, "inbound") as s:
                t0 = s.now()
                flow = tb.iperf(n=1, duration=dur, reverse=True, base_port=bulk_port,
                                pairs=[("l1", "w1")], cports=[cb])[0]
            talked = light.round_trips()
        assert flow.error is None, flow.error
        cls = next(iter(s.samples[-1][1]))
        # worker 0's part of the class while the flow ran (stats snapshots)
        part0 = sorted(c[cls]["per_worker"][0]["rate_bps"] / 10e6
                       for t, _, c in s.samples if t0 + 4 <= t <= t0 + dur)
        light = [(f["worker"], f["in"]["pkts"], f["out"]["pkts"]) for f in all_flows(tb)
                 if f["proto"] == "tcp" and f["wan"]["port"] == light_port]
        r = dict(goodput=steady_bps(flow.interval_bps, 4, dur),
                 wire=s.rate(cls, t0 + 4, t0 + dur), part0=part0[len(part0) // 2],
                 part0_range=(part0[0], part0[-1]), light=light, talked=talked)
        runs.append(r)
        return r

    try:
        picked = list(zip(*[iter(pick_cports(tb, [x for bp, lp in ports for x in (
            ("l1", "w1", bp, 0), ("l2", "w2", lp, 1))], base=27000))] * 2))
        r = measure_twice(run, lambda r: r["part0"] >= 0.95 and r["wire"] >= 0.95 * 10e6 and
                          r["goodput"] >= 0.9 * 10e6, tries=tries)
        st = tb.weir_stats()
    finally:
        restart(tb, tb.cfg)
    print(f"{mode}: bulk download alone on worker 0 {r['goodput'] / 1e6:.2f} Mbit/s goodput, "
          f"class {r['wire'] / 1e6:.2f} on the wire (10); worker 0's part of the class "
          f"{r['part0_range'][0]:.3f}-{r['part0_range'][1]:.3f}, median {r['part0']:.3f}; "
          f"light flow (worker, pkts in, out) {r['light']}, {r['talked']} round trips; "
          f"runs {len(runs)}; flow_split {split_frames(st)}")
    assert r["talked"] >= 5 * dur and r["light"] and r["light"][0][0] == 1, r
    assert r["part0"] >= 0.95, r
    assert r["wire"] >= 0.95 * 10e6, r
    assert r["goodput"] >= 0.9 * 10e6, r
    assert split_frames(st) == 0, st["ports"]


def test_three_workers(mw_tb):
    """3 workers (qpairs=3, still the 2 vCPUs): gold (20 of 30 Mbit/s) with flows on
    workers 0, 1, 2, 2 and bulk (10) on 2, 1, 0, 0, outbound. Each class's total holds
    within 2 %, its flows share it evenly wherever they run, no flow is split."""
    tb = mw_tb
    cfg = mw_config(tb.cfg_dir / "three.cfg", body_file="testbed-twoclass.cfg", workers=3)
    restart(tb, cfg)
    gold_w, bulk_w = [0, 1, 2, 2], [2, 1, 0, 0]
    dur = 14
    try:
        def run():
            gold_c, bulk_c = flows_on_workers(tb, gold_w, bulk_w)
            with Sampler(tb, "outbound") as s:
                t_start = s.now()
                res = {}
                threads = [threading.Thread(target=lambda k, kw: res.__setitem__(k, tb.iperf(**kw)),
                                            args=(k, kw), daemon=True) for k, kw in (
                    ("gold", dict(n=4, duration=dur, base_port=GOLD_PORT, cports=gold_c)),
                    ("bulk", dict(n=4, duration=dur, base_port=BULK_PORT, cports=bulk_c)))]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            t0 = t_start + 4
            return res, s.rate("gold", t0, t0 + 9), s.rate("bulk", t0, t0 + 9)

        res, gold, bulk = measure_twice(
            run, lambda r: abs(r[1] / GOLD - 1) <= 0.02 and abs(r[2] / BULK - 1) <= 0.02)
        st = tb.weir_stats()
    finally:
        restart(tb, tb.cfg)
    fair = {}
    for key in ("gold", "bulk"):
        assert all(f.error is None for f in res[key]), [f.error for f in res[key]]
        steady = [steady_bps(f.interval_bps, 4, 13) for f in res[key]]
        fair[key] = (round(jain(steady), 4), [round(x / 1e6, 2) for x in steady])
    per_worker = {c: [round(w["rate_bps"] / 1e6, 2) for w in v["per_worker"]]
                  for c, v in st["shaping"]["outbound"]["classes"].items()}
    print(f"3 workers: gold {gold / 1e6:.2f} Mbit/s (20), bulk {bulk / 1e6:.2f} (10); "
          f"Jain/steady Mbit/s {fair}; split at the end {per_worker}; flow_split "
          f"{split_frames(st)}; workers {[(w['flows_active'], w['rate_updates']) for w in st['workers']]}")
    assert len(st["workers"]) == 3
    assert abs(gold / GOLD - 1) <= 0.02, gold
    assert abs(bulk / BULK - 1) <= 0.02, bulk
    for key in ("gold", "bulk"):
        assert fair[key][0] >= 0.99, (key, fair[key])
    assert split_frames(st) == 0, st["ports"]


HOOK_PORT = 5401
HOOK_SCRIPT = """-- test_multiworker.py: on_flow across workers
for _, dir in ipairs({ "outbound", "inbound" }) do
  weir.link{ dir = dir, rate = "30mbit", default = "bulk" }
  weir.class{ dir = dir, name = "bulk", rate = "28mbit", ceil = "30mbit", prio = 1 }
  weir.class{ dir = dir, name = "penalty", rate = "1mbit", ceil = "2mbit", prio = 2 }
end
weir.on_flow(function(f)
  if f.proto == "tcp" and f.wan_port >= 5401 and f.wan_port <= 5404 then
    return "penalty"
  end
end)
"""


def test_hooks_move_flows_on_both_workers(mw_tb):
    """A Lua on_flow hook moves every flow to WAN ports 5401-5404 into a 2 Mbit/s class:
    two of them on worker 0, two on worker 1. The management lcore answers each
    worker's new-flow event: REST lists the four flows on both workers in the penalty
    class, and together they get the class's ceiling (shared by the rebalancer), not
    the link. Nothing stays queued after the transfers: a flow moved while its DRR
    queue, new and just emptied, waited on the old leaf's list used to be stuck for
    good (iperf3 hung in about one run in six; lib/sched/drr.c weir_drr_move, test_drr
    test_move_idle)."""
    tb = mw_tb
    (tb.cfg_dir / "hooks.lua").write_text(HOOK_SCRIPT)
    cfg = tb.cfg_dir / "hooks.cfg"
    cfg.write_text(weirtb.testbed_config_text(
        'policy = { script = "hooks.lua"; };\n'
        f"management = {{ port = {MGMT_PORT}; }};\n",
        stats_interval=STATS_INTERVAL, workers=WORKERS))
    restart(tb, cfg)
    try:
        want = [0, 0, 1, 1]
        pairs = default_pairs(tb, 4)
        cports = pick_cports(tb, [(l, w, HOOK_PORT + i, want[i]) for i, (l, w) in enumerate(pairs)],
                             base=24000)
        seen = {}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                for f in all_flows(tb):
                    if HOOK_PORT <= f["wan"]["port"] < HOOK_PORT + 4 and f["lan"]["port"] in cports:
                        seen[f["lan"]["port"]] = (f["worker"], f["out"]["class"])
                time.sleep(0.5)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        flows = tb.iperf(n=4, duration=10, base_port=HOOK_PORT, cports=cports)
        stop.set()
        t.join()
        time.sleep(2 * STATS_INTERVAL)
        st = tb.weir_stats()
    finally:
        restart(tb, tb.cfg)
    assert all(f.error is None for f in flows), [f.error for f in flows]
    steady = [steady_bps(f.interval_bps, 4, 10) for f in flows]
    h = st["hooks"]
    print(f"hooks, {WORKERS} workers: flows (worker, class) {seen}; "
          f"{sum(steady) / 1e6:.2f} Mbit/s in all {[round(x / 1e6, 2) for x in steady]}; "
          f"moves {h.get('moves')} applied {h.get('moves_applied')}; flow_split {split_frames(st)}")
    assert sorted(seen.values()) == sorted((w, "penalty") for w in want), seen
    assert h["moves_applied"] >= 4, h
    # The penalty class's 2 Mbit/s ceiling holds over both workers together.
    assert sum(steady) <= 2.0e6 * 1.1, steady
    assert sum(steady) >= 2.0e6 * 0.7, steady
    assert split_frames(st) == 0, st["ports"]
    left = {(d, c): (v["queued_pkts"], v["backlogged_flows"])
            for d in ("outbound", "inbound") for c, v in st["shaping"][d]["classes"].items()}
    assert all(v == (0, 0) for v in left.values()), left


def test_flow_split_counts_rollover(mw_tb):
    """flow_split can fail: unshaped, two uploads as fast as the machine goes.
    Last in the module: late segments of these lossy connections reach the next
    weir as mid-stream entries, which flow_split counts too. With 64-frame rings
    the kernel's fanout rollover (a socket's ring 3/4 full and the flow dominating
    it, or full) moves frames of a flow to the other queue: the worker that never
    saw its SYN counts them."""
    tb = mw_tb
    out = {}
    try:
        for frames in (2048, 64):
            cfg = tb.cfg_dir / f"unshaped-{frames}.cfg"
            cfg.write_text(weirtb.testbed_config_text(
                f"management = {{ port = {MGMT_PORT}; }};\n", stats_interval=STATS_INTERVAL,
                workers=WORKERS).replace("framecnt=2048", f"framecnt={frames}"))
            restart(tb, cfg)
            flows = tb.iperf(n=2, duration=6)
            st = tb.weir_stats()
            out[frames] = ([round(f.goodput_bps / 1e6) for f in flows],
                           [f.retransmits for f in flows], split_frames(st),
                           [w["flow_split"] for w in st["workers"]])
            assert all(f.error is None for f in flows), [f.error for f in flows]
    finally:
        restart(tb, tb.cfg)
    for frames, (gp, retx, split, per_worker) in out.items():
        print(f"framecnt {frames}: goodput Mbit/s {gp}, retransmits {retx}, flow_split {split} "
              f"per worker {per_worker}")
    # Unshaped at ~0.7 Gbit/s per flow the 2 shared vCPUs sometimes leave a
    # worker behind long enough for rollover even with 2048-frame rings
    # (measured 0 in one run, 6,888 frames in another): reported, not asserted.
    assert out[64][2] > 0, out


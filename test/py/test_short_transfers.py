"""Short transfers and lone bulk flows in every mode (issue 23), with real TCP.

One 20 Mbit/s class each way over a 40 ms path: a 1 MB HTTP download (curl against
python3 -m http.server) alone on the link must finish about as fast under every ACK-
controlling mode as under plain per-flow queues (TCR took 19 s, about one segment per
round trip); a lone bulk download must fill its class; pfq's CoDel must keep a sender's
RTT near the path's. And scripts/fct.py, the measurement behind docs/results/fct, must
still run (its --quick form).
"""
import contextlib
import statistics
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import traffic  # noqa: E402
from conftest import measure_twice, weir_testbed  # noqa: E402

RATE = "20mbit"
RTT_MS = 40
HTTP_PORT = 8000


def config(path, mode, aqm="codel", extra=""):
    """weir's config: `mode` both ways at RATE; `extra` more settings of `shaping`."""
    path.write_text(weirtb.testbed_config_text(
        f'shaping = {{ mode = "{mode}"; outbound = "{RATE}"; inbound = "{RATE}"; '
        f'aqm = "{aqm}"; {extra} }};\n', stats_interval=0.2))
    return path


@contextlib.contextmanager
def http_testbed(d, rtt_ms):
    """Two LAN hosts, one WAN host serving 100k and 1m over HTTP, rtt_ms away."""
    www = d / "www"
    www.mkdir()
    (www / "1m").write_bytes(bytes(range(256)) * 4096)
    (www / "100k").write_bytes(bytes(range(256)) * 400)
    with weir_testbed(config(d / "pfq.cfg", "pfq"), lan=2, wan=1,
                      paths=[weirtb.PathSpec(delay=rtt_ms / 2)]) as tb:
        tb.cfg_dir = d
        srv = tb.popen("w1", [sys.executable, "-m", "http.server", str(HTTP_PORT),
                              "--directory", str(www)])
        time.sleep(0.5)
        try:
            yield tb
        finally:
            srv.kill()
            srv.communicate()


@pytest.fixture(scope="module")
def st_tb(tmp_path_factory):
    with http_testbed(tmp_path_factory.mktemp("short"), RTT_MS) as tb:
        yield tb


def restart(tb, mode, aqm="codel", extra=""):
    import os
    if tb.gateway_running:
        rc = tb.stop_gateway()
        assert rc in (None, 0), f"weir exited {rc}"
    name = f"{mode}-{aqm}{'-x' if extra else ''}.cfg"
    os.environ["WEIR_TESTBED_CFG"] = str(config(tb.cfg_dir / name, mode, aqm, extra))
    tb.start_gateway("weir")


def fetch_1m(tb, name="1m", size_want=1 << 20):
    out = tb.run("l1", ["curl", "-s", "-o", "/dev/null", "--max-time", "60", "-w",
                        "%{time_total} %{size_download}",
                        f"http://{tb.addr('w1')}:{HTTP_PORT}/{name}"], timeout=70)
    secs, size = out.stdout.split()
    assert int(size) == size_want
    return float(secs)


def median_fetch(tb, mode, n=3):
    restart(tb, mode)
    fetch_1m(tb)    # warm: ARP, the server's first answer
    return statistics.median(fetch_1m(tb) for _ in range(n))


@pytest.mark.parametrize("mode", ["tcr", "postack", "postack-paced"])
def test_lone_download_as_fast_as_pfq(st_tb, mode):
    """A lone 1 MB download on an idle link, each right after the one before (a new
    connection each): within 1.1x of pfq's time. tcr took 19 s; then, until a closed
    connection stopped taking a share, tcr 1.11x and postack 1.09x (the previous
    download's share for a period); measured 1.00-1.03x since (issue 23 item 2's goal:
    5 %)."""
    bound = 1.1

    def run():
        return median_fetch(st_tb, "pfq"), median_fetch(st_tb, mode)

    pfq, t = measure_twice(run, lambda r: r[1] <= bound * r[0])
    print(f"1 MB download: pfq {pfq * 1000:.0f} ms, {mode} {t * 1000:.0f} ms")
    assert t <= bound * pfq, (mode, t, pfq)


def short_beside_bulk(tb, mode, n=4, duration=8, reps=5, extra="", stat=statistics.median):
    """Median (or `stat`) 100 KB download time idle and beside n bulk downloads (l2) in
    the class, started 3 s before, past their slow start, with the mode's config and
    `extra` shaping settings. Checks the bulk flows really loaded the class and that the
    transfers went on the new-flows list."""
    restart(tb, mode, extra=extra)

    def fetch_100k():
        return fetch_1m(tb, "100k", 102400)

    fetch_100k()    # warm
    idle = statistics.median(fetch_100k() for _ in range(3))
    res = {}
    bulk = threading.Thread(target=lambda: res.update(flows=traffic.iperf_flows(
        tb, n=n, duration=duration, reverse=True, cc="cubic", pairs=[("l2", "w1")] * n,
        base_port=5301)), daemon=True)
    bulk.start()
    time.sleep(3)   # past the bulk flows' slow start
    loaded = stat([fetch_100k() for _ in range(reps)])
    bulk.join()
    cls = tb.weir_stats()["shaping"]["inbound"]["classes"]
    young = sum(c.get("young_flows", 0) for c in (cls.values() if isinstance(cls, dict) else cls))
    print(f"100 KB download, {mode}: idle {idle * 1000:.0f} ms, beside {n} bulk downloads "
          f"{loaded * 1000:.0f} ms; inbound young_flows {young}")
    assert all(f.error is None for f in res["flows"]), res["flows"]
    # The bulk flows really loaded the class.
    assert sum(f.goodput_bps for f in res["flows"]) >= 0.7 * PAYLOAD_MAX
    assert young > 0
    return idle, loaded


@pytest.mark.parametrize("mode", ["pfq", "tcr"])
def test_short_download_beside_bulk_near_idle_speed(st_tb, mode):
    """Young flows first (docs/cbq.md): a 100 KB download beside 4 bulk downloads in its
    class takes within 1.3x of its idle time. Plain fair queueing gave it 1/5 of the
    class once past its first quantum: 305 ms against 207 idle under pfq, 1,240 under tcr."""
    idle, loaded = short_beside_bulk(st_tb, mode)
    assert loaded <= 1.3 * idle, (idle, loaded)


def test_new_flows_off_is_plain_drr(st_tb):
    """shaping.new_flows = false: plain DRR, as before RFC 8290. A download beside a bulk
    one puts no queue on the new-flows list and grants no young budget; with the default
    both counters move (the same exchange)."""
    counts = {}
    for extra in ("new_flows = false;", ""):
        restart(st_tb, "pfq", extra=extra)
        bulk = threading.Thread(target=lambda: traffic.iperf_flows(
            st_tb, n=1, duration=4, reverse=True, cc="cubic", pairs=[("l2", "w1")],
            base_port=5301), daemon=True)
        bulk.start()
        time.sleep(1.5)
        fetch_1m(st_tb, "100k", 102400)
        bulk.join()
        cls = st_tb.weir_stats()["shaping"]["inbound"]["classes"]
        cls = cls.values() if isinstance(cls, dict) else cls
        counts[extra] = (sum(c.get("new_flows", 0) for c in cls),
                         sum(c.get("young_flows", 0) for c in cls))
    print(f"inbound (new_flows, young_flows): off {counts['new_flows = false;']}, "
          f"on {counts['']}")
    assert counts["new_flows = false;"] == (0, 0), counts
    assert counts[""][0] > 0 and counts[""][1] > 0, counts


# What a 20 Mbit/s class carries as TCP payload: 1448 of every 1514 + 24 bytes weir
# charges (Ethernet headers, preamble, FCS and gap: shaping.overhead).
PAYLOAD_MAX = 20e6 * 1448 / (1514 + 24)


def lone_steady_bps(tb, cc, reverse, duration):
    """One iperf3 flow l1 <-> w1 alone in the class: its goodput from its 5th second on."""
    flows = traffic.iperf_flows(tb, n=1, duration=duration, reverse=reverse, cc=cc,
                                pairs=[("l1", "w1")])
    assert flows[0].error is None, flows[0].error
    return traffic.steady_bps(flows[0].interval_bps, 4)


@pytest.mark.parametrize("mode", ["pfq", "tcr", "postack", "postack-paced"])
def test_lone_bulk_download_fills_its_class(st_tb, mode):
    """One cubic download alone in the 20 Mbit/s class carries >= 0.9 of the payload the
    class can carry, in steady state. tcr carried 0.41 Mbit/s of 200 (issue 23)."""
    restart(st_tb, mode)

    def run():
        return lone_steady_bps(st_tb, "cubic", True, 10)

    # postack's and postack-paced's read 0.86-0.91 and 0.57-0.94 while their hold gates
    # saw only the queue (issue 23 cells 2 and 4, docs/results/fct/ack-loop.md); with
    # the data on its way counted, 0.97-0.99.
    floor = 0.9
    bps = measure_twice(run, lambda b: b >= floor * PAYLOAD_MAX)
    print(f"lone download, {mode}: {bps / 1e6:.2f} Mbit/s, {bps / PAYLOAD_MAX:.3f} of the "
          f"{PAYLOAD_MAX / 1e6:.2f} the class carries")
    assert bps >= floor * PAYLOAD_MAX, bps


@pytest.mark.parametrize("mode", ["postack", "postack-paced"])
def test_ack_limit_does_not_cap_a_long_fat_flow(st_tb, mode):
    """A flow's ACKs are cut to ack_limit segments past its share x its round trip, not
    to ack_limit segments alone, and passed ACKs as well as held ones. With only held
    ACKs cut, to ack_limit segments, a flow whose BDP exceeds ack_limit x MSS was
    window-limited, or its passed ACKs reopened the window and its store sat at
    ack_limit, most ACKs leaving by eviction instead of by the mode's rule (a lone cubic
    download at 150 ms, 200 Mbit/s, postack-paced: 0.92-0.95 of the class, 70,445 of
    103,292 held ACKs evicted; now 0.994-0.997). Here the same proportions at 20 Mbit/s:
    ack_limit 16 against a BDP of ~70 segments. The download must carry >= 0.9 of the
    payload with at most a fifth of its held ACKs evicted (the old rule: 0.95-0.96)."""
    restart(st_tb, mode, extra="postack = { ack_limit = 16; };")

    def run():
        return lone_steady_bps(st_tb, "cubic", True, 10), st_tb.weir_stats()["postack"]

    bps, st = measure_twice(run, lambda r: r[0] >= 0.9 * PAYLOAD_MAX
                            and r[1]["limit_released"] <= 0.2 * r[1]["held"])
    print(f"lone download, {mode}, ack_limit 16: {bps / 1e6:.2f} Mbit/s, "
          f"{bps / PAYLOAD_MAX:.3f} of the class; postack {st}")
    assert bps >= 0.9 * PAYLOAD_MAX, bps
    # postack holds only past the share's BDP, which a window of BDP + 16 segments
    # seldom reaches (measured: nothing held); postack-paced paces every ACK. (The store
    # never holds more than ack_limit by construction: nothing to assert there.)
    assert mode == "postack" or st["held"] > 0, st
    assert st["limit_released"] <= 0.2 * st["held"], st


@pytest.mark.parametrize("mode", ["postack", "postack-paced"])
def test_eight_downloads_fill_their_class(st_tb, mode):
    """Eight cubic downloads in the 20 Mbit/s class carry >= 0.96 of its payload, and
    its queue stays short. postack-paced's catch-up rule compared a flow's data on its
    way with the class's queue, which other flows' packets fill: 0.89-0.95 here, 0.73-0.85
    at 200 Mbit/s; with the flow's own queue 0.996-0.999, about 34 packets queued."""
    restart(st_tb, mode)

    def run():
        flows = traffic.iperf_flows(st_tb, n=8, duration=10, reverse=True, cc="cubic",
                                    pairs=[("l1", "w1")] * 8)
        assert all(f.error is None for f in flows), flows
        return sum(sum(f.interval_bps[4:]) / len(f.interval_bps[4:]) for f in flows)

    floor = 0.96
    bps = measure_twice(run, lambda b: b >= floor * PAYLOAD_MAX)
    print(f"8 downloads, {mode}: {bps / 1e6:.2f} Mbit/s, {bps / PAYLOAD_MAX:.3f} of the "
          f"{PAYLOAD_MAX / 1e6:.2f} the class carries")
    assert bps >= floor * PAYLOAD_MAX, bps


@pytest.mark.parametrize("reverse", [True, False], ids=["download", "upload"])
def test_lone_bbr_flow_fills_tcr_class(st_tb, reverse):
    """One bbr flow alone in the 20 Mbit/s tcr class, each way, carries >= 0.9 of the
    payload the class can carry in steady state (issue 23: 0.78-0.92 on a loaded VM). bbr
    sets its rate from the delivery rate the ACKs show, and TCR paces those ACKs: a
    watchdog look that came late released one ACK and lost the rest of the share's time
    (lib/modes/tcr.c, weir_tcr_pace_owed)."""
    restart(st_tb, "tcr")

    def run():
        return lone_steady_bps(st_tb, "bbr", reverse, 12)

    bps = measure_twice(run, lambda b: b >= 0.9 * PAYLOAD_MAX)
    print(f"lone bbr {'download' if reverse else 'upload'}, tcr: {bps / 1e6:.2f} Mbit/s, "
          f"{bps / PAYLOAD_MAX:.3f} of the {PAYLOAD_MAX / 1e6:.2f} the class carries")
    assert bps >= 0.9 * PAYLOAD_MAX, bps


def sender_rtts(tb, host, port):
    """The smoothed RTT (ms) of each bulk TCP socket of `host` to WAN port `port` (more
    than 1 MB acknowledged: not iperf3's idle control connection)."""
    out = tb.run(host, ["ss", "-tin", "dst", f":{port}"], check=False).stdout
    rtts = []
    for line in out.splitlines():
        toks = dict(t.split(":", 1) for t in line.split() if ":" in t and not t[0].isdigit())
        if "rtt" in toks and int(toks.get("bytes_acked", "0")) > 1_000_000:
            rtts.append(float(toks["rtt"].split("/")[0]))
    return rtts


def pfq_uploads_rtt(tb, n, aqm, path_ms, duration=12, port=5401):
    """n cubic bulk uploads (l2 to w1) in pfq with `aqm`: the median smoothed RTT (ms)
    their senders report from second 6 on, and their steady goodput (bit/s) over the
    same seconds."""
    restart(tb, "pfq", aqm)
    bulk, rtts = {}, []

    def go():
        bulk["f"] = traffic.iperf_flows(tb, n=n, duration=duration, cc="cubic",
                                        pairs=[("l2", "w1")] * n, base_port=port)

    t = threading.Thread(target=go)
    t.start()
    time.sleep(6)
    for _ in range(2 * (duration - 8)):
        rtts += sender_rtts(tb, "l2", port) + sender_rtts(tb, "l2", port + 1)
        time.sleep(0.5)
    t.join()
    assert all(f.error is None for f in bulk["f"]), bulk["f"]
    gp = sum(traffic.steady_bps(f.interval_bps, 6) for f in bulk["f"])
    rtt = statistics.median(rtts) if rtts else float("nan")
    print(f"{n} pfq uploads, aqm={aqm}: sender srtt median {rtt:.1f} ms (path {path_ms}), "
          f"bulk {gp / 1e6:.2f} Mbit/s")
    return rtt, gp


def test_codel_keeps_pfq_rtt_near_the_path(st_tb):
    """4 bulk uploads in pfq: their senders' smoothed RTT stays within 2x the path's with
    CoDel (aqm = codel, the default), goodput within 5 % of the same without it (where
    the flows' queues stand at their limit)."""
    rtt, bps = pfq_uploads_rtt(st_tb, 4, "codel", RTT_MS)
    _, bps_none = pfq_uploads_rtt(st_tb, 4, "none", RTT_MS)
    assert rtt <= 2 * RTT_MS, (rtt, bps, bps_none)
    assert bps >= 0.95 * bps_none, (rtt, bps, bps_none)


LIGHT_PORT = 5341


@pytest.mark.parametrize("mode", ["tcr", "ipabr"])
def test_bulk_download_beside_light_flow_fills_its_class(st_tb, mode):
    """Max-min per-flow shares (lib/worker/worker_active.c, docs/cbq.md): one bulk download (l2)
    in the 20 Mbit/s class beside a light TCP connection (l1: 64 bytes each way every
    0.1 s, ~10 kbit/s, as an ssh session or a keep-alive) carries >= 0.9 of the payload
    the class can carry. The light flow counted as a whole active flow: the download's
    window was sized to half the class (one worker: ipabr 4.77-4.80 of 10 Mbit/s on the
    wire, tcr 7.2-8.4)."""
    restart(st_tb, mode)
    dur = 12

    def run():
        with traffic.LightConnection(st_tb, "l1", "w1", LIGHT_PORT, secs=dur + 2) as light:
            time.sleep(1)
            flow = traffic.iperf_flows(st_tb, n=1, duration=dur, reverse=True, cc="cubic",
                                       pairs=[("l2", "w1")], base_port=5311)[0]
            talked = light.round_trips()
        assert flow.error is None, flow.error
        steady = flow.interval_bps[4:dur]
        return sum(steady) / len(steady), talked

    bps, talked = measure_twice(run, lambda r: r[0] >= 0.9 * PAYLOAD_MAX)
    print(f"bulk download beside a light flow, {mode}: {bps / 1e6:.2f} Mbit/s, "
          f"{bps / PAYLOAD_MAX:.3f} of the {PAYLOAD_MAX / 1e6:.2f} the class carries; "
          f"light flow {talked} round trips")
    assert talked >= 5 * dur, talked
    assert bps >= 0.9 * PAYLOAD_MAX, bps

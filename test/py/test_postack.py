"""PostACK with real Linux TCP (issue #4, short versions of the paper's experiments).

One 10 Mbit/s class each way, three TCP flows over the paper's 10/50/150 ms paths, run
in mode pfq (data waits at the gateway) and in mode postack (ACKs wait instead): postack
must keep the goodput and per-flow fairness while holding far fewer data packets, both
for uploads (outbound) and downloads (inbound, the paper's Appendix A). A byte-verified
transfer checks that held and released ACKs never corrupt or reorder anything.
"""
import os
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from conftest import measure_twice, weir_testbed  # noqa: E402
from weirtb.topology import allow_congestion_control  # noqa: E402
from weirtb.traffic import jain, steady_bps  # noqa: E402

RATE = "10mbit"
STATS_INTERVAL = 0.2


def config(path, mode, aqm="codel"):
    path.write_text(weirtb.testbed_config_text(
        f'shaping = {{ mode = "{mode}"; outbound = "{RATE}"; inbound = "{RATE}"; '
        f'aqm = "{aqm}"; }};\n',
        stats_interval=STATS_INTERVAL))
    return path


@pytest.fixture(scope="module")
def pa_tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("postack")
    with weir_testbed(config(d / "postack.cfg", "postack"), lan=2, wan=3) as tb:
        tb.cfg_dir = d
        yield tb


def run_mode(tb, mode, reverse, aqm="codel"):
    """Restart weir in `mode`, run 3 flows for 14 s; returns (per-flow steady goodput,
    mean and peak data packets queued in the shaped direction, peak ACKs held, stats).
    pfq is run without AQM (aqm="none"): the paper's per-flow queues, what PostACK is
    measured against; CoDel's own queues are tested in test_short_transfers.py."""
    os.environ["WEIR_TESTBED_CFG"] = str(config(tb.cfg_dir / f"{mode}-{aqm}.cfg", mode, aqm))
    tb.start_gateway("weir")
    direction = "inbound" if reverse else "outbound"
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            st = tb.weir_stats()
            samples.append((st["shaping"][direction]["queued_pkts"],
                            (st.get("postack") or {}).get("acks_held", 0)))
            time.sleep(STATS_INTERVAL)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    flows = tb.iperf(n=3, duration=14, reverse=reverse)
    stop.set()
    t.join()
    assert all(f.error is None for f in flows), [f.error for f in flows]
    steady = [steady_bps(f.interval_bps, 4, 14) for f in flows]
    q = [s[0] for s in samples[20:]]   # after slow start
    return steady, sum(q) / len(q), max(q), max(s[1] for s in samples), tb.weir_stats()


def report(res, label):
    """Print what run_mode measured for each mode."""
    for m, (steady, qmean, qmax, acks, st) in res.items():
        print(f"{label} {m}: {sum(steady) / 1e6:.2f} Mbit/s, Jain {jain(steady):.4f} "
              f"{[round(x / 1e6, 2) for x in steady]}, data queued mean {qmean:.1f} max {qmax}, "
              f"ACKs held max {acks}; postack {st['postack']}")


@pytest.mark.parametrize("reverse", [False, True], ids=["upload", "download"])
def test_postack_holds_acks_not_data(pa_tb, reverse):
    def throughput_ok(res):
        return sum(res["postack"][0]) >= 0.95 * sum(res["pfq"][0])

    # Both modes again when the goodput comparison fails once (a noisy host).
    res = measure_twice(lambda: {"pfq": run_mode(pa_tb, "pfq", reverse, aqm="none"),
                                 "postack": run_mode(pa_tb, "postack", reverse)},
                        throughput_ok)
    report(res, "download" if reverse else "upload")
    pfq, pa = res["pfq"], res["postack"]
    assert sum(pa[0]) >= 0.95 * sum(pfq[0]), (sum(pa[0]), sum(pfq[0]))
    if not reverse:
        # Uploads: a released ACK brings data back within the LAN round trip,
        # so the release rule keeps every flow's queue a packet or two deep.
        assert jain(pa[0]) >= 0.98, pa[0]
        assert pa[1] <= 0.4 * pfq[1], (pa[1], pfq[1])
    else:
        # Downloads (Appendix A): data comes back a WAN round trip after its
        # ACK; starving flows are paced at their fair share (docs/postack.md).
        # Measured 0.977-0.980 here; the bound leaves room for a noisy host.
        assert jain(pa[0]) >= 0.9, pa[0]
        # A far sender's flow is held only past half its sender's BDP (postack_over):
        # measured 27.5-37.6 packets against pfq's 52-61 (the 150 ms flow alone may keep
        # ~21), where the paper's rule kept ~35 and left the class idle at times.
        assert pa[1] <= 0.7 * pfq[1], (pa[1], pfq[1])
        assert pa[4]["postack"]["paced"] > 0
    assert pa[3] > 0 and pfq[3] == 0
    assert pa[4]["postack"]["released"] > 0 and pa[4]["postack"]["pool_full"] == 0


def test_postack_paced_upload(pa_tb):
    """postack-paced (Fig. 4's on-off ACK pacing): the class near its rate,
    fair, with a fraction of pfq's data queued."""
    def ok(res):
        return sum(res["postack-paced"][0]) >= 0.9 * sum(res["pfq"][0])

    res = measure_twice(lambda: {"pfq": run_mode(pa_tb, "pfq", False, aqm="none"),
                                 "postack-paced": run_mode(pa_tb, "postack-paced", False)},
                        ok)
    report(res, "upload")
    pfq, pa = res["pfq"], res["postack-paced"]
    assert sum(pa[0]) >= 0.9 * sum(pfq[0]), (sum(pa[0]), sum(pfq[0]))
    assert jain(pa[0]) >= 0.95, pa[0]
    assert pa[1] <= 0.4 * pfq[1], (pa[1], pfq[1])
    assert pa[3] > 0 and pa[4]["postack"]["paced"] > 0 and pa[4]["postack"]["pool_full"] == 0


def test_postack_paced_tcp_beside_udp_flood(pa_tb):
    """postack-paced, one 10 Mbit/s class: two TCP uploads beside a 30 Mbit/s UDP flood
    in the same class. The flood stands in its own long queue and does not answer ACK
    pacing; the TCP flows must still get their ticks (they got 0.000 of the class when
    any class backlog stopped them, issue 17 item 4), and DRR gives them about two
    thirds. A backlog spread a few packets over many paced flows is their own and does
    stop the ticks (Fig. 8's buffer figures): tests/results in docs/postack.md."""
    os.environ["WEIR_TESTBED_CFG"] = str(config(pa_tb.cfg_dir / "paced-udp.cfg", "postack-paced"))
    pa_tb.start_gateway("weir")
    res = {}
    udp = threading.Thread(target=lambda: res.__setitem__("udp", pa_tb.iperf(
        n=1, duration=14, pairs=[("l2", "w2")], base_port=5340,
        extra_args=("-u", "-b", "30M", "-l", "1400"))), daemon=True)
    udp.start()
    time.sleep(1)
    tcp = pa_tb.iperf(n=2, duration=12, pairs=[("l1", "w1"), ("l1", "w1")], base_port=5342)
    udp.join()
    st = pa_tb.weir_stats()
    assert all(f.error is None for f in tcp), [f.error for f in tcp]
    steady = [steady_bps(f.interval_bps, 3, 12) for f in tcp]
    c = st["shaping"]["outbound"]
    print(f"postack-paced beside a UDP flood: TCP {[round(x / 1e6, 2) for x in steady]} Mbit/s "
          f"of 10; class drops {c['drops_flow'] + c['drops_class']}; postack {st['postack']}")
    assert sum(steady) >= 0.45 * 10e6, steady
    assert st["postack"]["paced"] > 0


def test_postack_transfer_is_byte_exact(pa_tb):
    os.environ["WEIR_TESTBED_CFG"] = str(config(pa_tb.cfg_dir / "postack.cfg", "postack"))
    pa_tb.start_gateway("weir")
    r = pa_tb.bulk(src="l1", dst="w3", nbytes=8_000_000, port=5310)   # 150 ms path
    st = pa_tb.weir_stats()
    print(f"8 MB over 150 ms at 10 Mbit/s: {r.mbit_s:.2f} Mbit/s, postack {st['postack']}")
    assert r.ok, r
    assert st["postack"]["held"] > 100
    code = pa_tb.stop_gateway()
    assert code == 0, pa_tb.log_tail("weir")


@pytest.mark.parametrize("mode", ["postack-paced", "postack"])
def test_sigterm_mid_flow_gives_every_mbuf_back(pa_tb, mode):
    """Issue 16.8, short form of the satellite case: 32 cubic downloads in a
    1.536 Mbit/s class over the 150 ms path, weir stopped with SIGTERM while
    they run. postack-paced holds ACKs nearly all the time; they were still
    in the ACK store when weir counted the pool (exit 3)."""
    cfg = pa_tb.cfg_dir / f"sat-{mode}.cfg"
    cfg.write_text(weirtb.testbed_config_text(
        f'shaping = {{ mode = "{mode}"; outbound = "1.536mbit"; inbound = "1.536mbit"; }};\n',
        stats_interval=STATS_INTERVAL))
    os.environ["WEIR_TESTBED_CFG"] = str(cfg)
    pa_tb.start_gateway("weir")
    allow_congestion_control("cubic")
    server = pa_tb.popen("w3", ["iperf3", "-s", "-1", "-p", "5390"])
    time.sleep(0.5)
    client = pa_tb.popen("l1", ["iperf3", "-c", pa_tb.addr("w3"), "-p", "5390", "-P", "32",
                                "-R", "-C", "cubic", "-t", "60"])
    try:
        held = 0
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and held == 0:
            time.sleep(1)
            held = (pa_tb.weir_stats().get("postack") or {}).get("acks_held", 0)
        time.sleep(3)
        st = pa_tb.weir_stats()
        code = pa_tb.stop_gateway()
    finally:
        for p in (client, server):
            p.kill()
            p.wait()
    print(f"{mode}: ACKs held at SIGTERM ~{st['postack'].get('acks_held')}, exit {code}")
    assert code == 0, pa_tb.log_tail("weir", 40)
    assert "mbufs in use after shutdown: 0 " in pa_tb.log_tail("weir", 40)

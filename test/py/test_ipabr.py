"""The ipabr mode (IP-ABR, seed 000; docs/ipabr.md) with real Linux TCP.

One 8 Mbit/s class each way in ipabr over a 40 ms path. Four cubic uploads (each with
iperf3's idle control connection beside it, which must take no share): the class is
filled, every flow gets its share, each flow's rate is steady from second to second, and
the senders' RTT stays near the path's (the rate is set by the window, not by a queue at
the gateway). A lone 1 MB download finishes about as fast as under pfq. And
scripts/ipabr_experiments.py still runs (--quick).
"""
import os
import statistics
import subprocess
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
from test_short_transfers import sender_rtts  # noqa: E402

RATE = 8e6
RTT_MS = 40
HTTP_PORT = 8000
# TCP payload an 8 Mbit/s class carries: 1448 of every 1514 + 24 bytes weir charges.
PAYLOAD_MAX = RATE * 1448 / (1514 + 24)


def config(path, mode):
    path.write_text(weirtb.testbed_config_text(
        f'shaping = {{ mode = "{mode}"; outbound = "8mbit"; inbound = "8mbit"; }};\n',
        stats_interval=0.2))
    return path


@pytest.fixture(scope="module")
def ia_tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("ipabr")
    www = d / "www"
    www.mkdir()
    (www / "1m").write_bytes(bytes(range(256)) * 4096)
    with weir_testbed(config(d / "ipabr.cfg", "ipabr"), lan=2, wan=1,
                      paths=[weirtb.PathSpec(delay=RTT_MS / 2)]) as tb:
        tb.cfg_dir = d
        srv = tb.popen("w1", [sys.executable, "-m", "http.server", str(HTTP_PORT),
                              "--directory", str(www)])
        time.sleep(0.5)
        try:
            yield tb
        finally:
            srv.kill()
            srv.communicate()


def restart(tb, mode):
    if tb.gateway_running:
        rc = tb.stop_gateway()
        assert rc in (None, 0), f"weir exited {rc}"
    os.environ["WEIR_TESTBED_CFG"] = str(config(tb.cfg_dir / f"{mode}.cfg", mode))
    tb.start_gateway("weir")


def test_ipabr_holds_a_class_steadily(ia_tb):
    """4 cubic uploads, 12 s: together >= 0.85 of what the class carries, Jain >= 0.95,
    each flow's 1-s goodput varies by at most 20 % of its mean (std/mean), the senders'
    smoothed RTT below 2x the path's, and the windows were cut by Eq. 4.6."""
    restart(ia_tb, "ipabr")

    def run():
        res, rtts = {}, []

        def go():
            res["f"] = traffic.iperf_flows(ia_tb, n=4, duration=12, cc="cubic",
                                           pairs=[("l1", "w1"), ("l2", "w1")] * 2,
                                           base_port=5501)
        t = threading.Thread(target=go)
        t.start()
        time.sleep(7)
        for _ in range(6):
            for port in range(5501, 5505):
                rtts += sender_rtts(ia_tb, "l1", port) + sender_rtts(ia_tb, "l2", port)
            time.sleep(0.5)
        t.join()
        flows = res["f"]
        for f in flows:
            assert f.error is None, f.error
        steady = [f.interval_bps[4:] for f in flows]
        means = [statistics.mean(s) for s in steady]
        cov = max(statistics.pstdev(s) / statistics.mean(s) for s in steady)
        jain = sum(means) ** 2 / (len(means) * sum(m * m for m in means))
        return {"total": sum(means), "jain": jain, "cov": cov,
                "rtt": statistics.median(rtts) if rtts else float("nan"),
                "means": [round(m / 1e6, 2) for m in means]}

    r = measure_twice(run, lambda r: r["total"] >= 0.85 * PAYLOAD_MAX and r["jain"] >= 0.95
                      and r["cov"] <= 0.2)
    st = ia_tb.weir_stats()["ipabr"]
    print(f"ipabr, 4 uploads: {r['total'] / 1e6:.2f} Mbit/s of {PAYLOAD_MAX / 1e6:.2f}, "
          f"per flow {r['means']}, Jain {r['jain']:.3f}, worst std/mean {r['cov']:.3f}, "
          f"sender srtt {r['rtt']:.1f} ms; counters {st}")
    assert r["total"] >= 0.85 * PAYLOAD_MAX, r
    assert r["jain"] >= 0.95, r
    assert r["cov"] <= 0.2, r
    assert r["rtt"] <= 2 * RTT_MS, r
    assert st["cut"] > 0 and st["rtt_samples_receiver"] > 0, st


def fetch_1m(tb):
    out = tb.run("l1", ["curl", "-s", "-o", "/dev/null", "--max-time", "60", "-w",
                        "%{time_total} %{size_download}",
                        f"http://{tb.addr('w1')}:{HTTP_PORT}/1m"], timeout=70)
    secs, size = out.stdout.split()
    assert int(size) == 1 << 20
    return float(secs)


def median_fetch(tb, mode, n=3):
    restart(tb, mode)
    fetch_1m(tb)    # warm: ARP, the server's first answer
    return statistics.median(fetch_1m(tb) for _ in range(n))


def test_lone_download_as_fast_as_pfq(ia_tb):
    """A lone 1 MB download on the idle class: within 1.2x of pfq's time (a window sized
    to the whole class over the handshake's round trip must not slow its start)."""
    def run():
        return median_fetch(ia_tb, "pfq"), median_fetch(ia_tb, "ipabr")

    pfq, t = measure_twice(run, lambda r: r[1] <= 1.2 * r[0])
    print(f"1 MB download: pfq {pfq * 1000:.0f} ms, ipabr {t * 1000:.0f} ms")
    assert t <= 1.2 * pfq, (t, pfq)

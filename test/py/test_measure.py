"""Passive TCP measurement in weir (lib/worker/tcpmeas.h, docs/measure.md), checked against
the emulated paths of weir-wanemu: the WAN-side round trip weir measures for a flow is
the path's round trip within 1 ms (10 and 50 ms paths here; 150 ms by hand with
scripts/measure_accuracy.py), and the retransmissions of a sender whose path drops
packets are counted as the sender counts them. GET /api/v1/hosts and /measure answer
with the same flows.
"""
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import traffic  # noqa: E402
from conftest import weir_testbed  # noqa: E402

MGMT_PORT = 18439
PY = "/usr/bin/python3"
# One-way delays: round trips of 10 and 50 ms (by hand, e.g. WEIR_MEASURE_ONE_WAY_MS=5,25,75
# adds the 150 ms path); the last WAN host's 10 ms path drops every 40th packet.
ONE_WAY = [float(x) for x in os.environ.get("WEIR_MEASURE_ONE_WAY_MS", "5,25").split(",")]
PATHS = [weirtb.PathSpec(delay=d) for d in ONE_WAY] + [weirtb.PathSpec(delay=5, ploss=40)]
LOSSY = f"w{len(PATHS)}"
# The leaves' mode (by hand: WEIR_MEASURE_MODE=postack, tcr, ipabr, fifo...).
MODE = os.environ.get("WEIR_MEASURE_MODE", "pfq")


def config(path):
    path.write_text(weirtb.testbed_config_text(
        f'shaping = {{ mode = "{MODE}"; outbound = "50mbit"; inbound = "50mbit"; }};\n'
        f"management = {{ port = {MGMT_PORT}; }};\n", stats_interval=0.5))
    return path


@pytest.fixture(scope="module")
def tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("measure")
    with weir_testbed(config(d / "weir.cfg"), lan=1, wan=len(PATHS), paths=PATHS) as tb:
        yield tb


def api(tb, path):
    return json.loads(tb.run("gw", ["curl", "-sf", f"http://127.0.0.1:{MGMT_PORT}{path}"]).stdout)


def data_flow(tb, wan):
    """The flow to WAN host `wan` that carried the most bytes (iperf3's data, not its
    control connection)."""
    flows = [f for f in api(tb, "/api/v1/flows?proto=tcp&limit=1000")["flows"]
             if f["wan"]["addr"] == tb.addr(wan)]
    assert flows, f"no TCP flow to {wan}"
    return max(flows, key=lambda f: f["out"]["bytes"] + f["in"]["bytes"])


def test_wan_rtt_within_1ms_of_path(tb):
    """Uploads of 15 Mbit/s each to the 10 and 50 ms paths (50 Mbit/s for all): the
    WAN side's smallest round trip is the path's within 1 ms (weir's own queue left out:
    a probe starts when its frame leaves), its smoothed one no shorter and at most a few
    ms longer (the receiver's ACK pacing and the emulator's own backlog under load are
    part of the path), the LAN side's under 1 ms (a veth pair)."""
    flows = traffic.iperf_flows(tb, n=len(ONE_WAY), duration=3,
                                pairs=[("l1", f"w{i + 1}") for i in range(len(ONE_WAY))],
                                extra_args=("-b", "15M"))
    for f in flows:
        assert f.error is None, f.error
    for i, one_way in enumerate(ONE_WAY):
        wan, rtt = f"w{i + 1}", 2 * one_way
        f = data_flow(tb, wan)
        print(f"{wan} path {rtt} ms: wan min {f['rtt_wan_min_ms']} srtt {f['srtt_wan_ms']} "
              f"({f['rtt_wan_samples']} samples); lan min {f['rtt_lan_min_ms']} "
              f"srtt {f['srtt_lan_ms']} ({f['rtt_lan_samples']})")
        assert f["rtt_wan_samples"] >= 10, f
        assert abs(f["rtt_wan_min_ms"] - rtt) <= 1.0, f
        assert rtt - 1.0 <= f["srtt_wan_ms"] <= rtt * 1.2 + 5.0, f
        assert f["rtt_lan_samples"] >= 1 and f["rtt_lan_min_ms"] < 1.0, f
    hosts = api(tb, "/api/v1/hosts?sort=rtt")
    assert hosts["hosts"][0]["addr"] == tb.addr("l1"), hosts
    wan = hosts["hosts"][0]["rtt_wan_ms"]
    # Per host: the flows' smoothed round trips sampled in the last interval.
    lo, hi = 2 * min(ONE_WAY), 2 * max(ONE_WAY)
    assert wan is not None and lo - 1 <= wan["min"] <= wan["median"] <= wan["p95"] and \
        hi - 1 <= wan["p95"] <= hi * 1.2 + 5, hosts
    # weirctl shows the same: the host's round trips, the flows' RTT columns.
    ctl = [PY, str(REPO / "scripts" / "weirctl"), "--url", f"http://127.0.0.1:{MGMT_PORT}"]
    out = tb.run("gw", ctl + ["hosts", "--sort", "rtt"]).stdout
    assert tb.addr("l1") in out and "RTT_WAN" in out, out
    out = tb.run("gw", ctl + ["flows", "--proto", "tcp"]).stdout
    assert "RTT_WAN" in out and "ms" in out, out
    m = api(tb, "/api/v1/measure?top=5")
    assert m["enabled"] and m["totals"]["samples"] > 0, m
    assert m["tcp_flows"] >= 2 and "default" in m["classes"]["outbound"], m
    metrics = tb.run("gw", ["curl", "-sf", f"http://127.0.0.1:{MGMT_PORT}/metrics"]).stdout
    assert "weir_tcp_rtt_samples_total" in metrics and \
        'weir_class_tcp_rtt_flows{direction="outbound",class="default",side="wan",le="+Inf"}' \
        in metrics, metrics[-2000:]


def test_retransmissions_counted_on_a_lossy_path(tb):
    """A bulk upload over the path that drops every 40th packet after weir: weir counts
    the sender's retransmissions (its segments below the highest sequence seen) as the
    sender's stack does, and no hole (nothing is lost before weir)."""
    flows = traffic.iperf_flows(tb, n=1, duration=3, pairs=[("l1", LOSSY)], extra_args=("-b", "10M"))
    assert flows[0].error is None, flows[0].error
    f = data_flow(tb, LOSSY)
    sent = flows[0].retransmits
    print(f"lossy upload: sender retransmits {sent}, weir out {f['out']}")
    assert sent and sent > 0
    assert 0.8 * sent <= f["out"]["retrans_segs"] <= 1.2 * sent + 2, (sent, f["out"])
    assert f["out"]["retrans_bytes"] >= 1000 * f["out"]["retrans_segs"], f["out"]
    assert f["in"]["dupacks"] > 0, f["in"]
    top = api(tb, "/api/v1/measure?top=10")["worst_retrans"]
    assert tb.addr(LOSSY) in [t["wan"]["addr"] for t in top], top

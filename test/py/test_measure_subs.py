"""TCP measurement per subscriber (GET /api/v1/measure?by=subscriber, docs/measure.md):
two subscribers (LibreQoS files), each a LAN host uploading at once, one over a clean
10 ms path and one over a 50 ms path that drops every 40th packet after weir. The
second is the worst by round trip and by retransmissions, the first's WAN round trip
is its path's, and `weirctl top` lists them.
"""
import json
import shutil
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
from conftest import weir_testbed  # noqa: E402

MGMT_PORT = 18441
PY = "/usr/bin/python3"
PATHS = [weirtb.PathSpec(delay=5), weirtb.PathSpec(delay=25, ploss=40)]
HEADER = ("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,"
          "Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,"
          "Download Max Mbps,Upload Max Mbps,Comment,sqm\n")


DIRS = {}


@pytest.fixture(scope="module")
def tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("measure_subs")
    DIRS["d"] = d
    (d / "network.json").write_text(json.dumps(
        {"Site": {"downloadBandwidthMbps": 50, "uploadBandwidthMbps": 50, "type": "Site",
                  "children": {}}}))
    (d / "ShapedDevices.csv").write_text(
        HEADER + "".join(f"c-l{i},circuit {i},d{i},cpe,Site,,,,10.77.1.{i},,1,1,40,40,,\n"
                         for i in (1, 2)))
    cfg = d / "weir.cfg"
    cfg.write_text(weirtb.testbed_config_text(
        'shaping = { mode = "pfq"; outbound = "50mbit"; inbound = "50mbit"; };\n'
        'subscribers = { shaped_devices = "ShapedDevices.csv"; network = "network.json"; };\n'
        f"management = {{ port = {MGMT_PORT}; }};\n"
        f'capture = {{ dir = "{d}/captures"; }};\n', stats_interval=2))     # the last interval: 2 s
    with weir_testbed(cfg, lan=2, wan=2, paths=PATHS) as tb:
        yield tb


def get(tb, path, body=None):
    post = ["-X", "POST", "-H", "Content-Type: application/json", "-d", json.dumps(body)] \
        if body is not None else []
    out = tb.run("gw", ["curl", "-s", "-w", "\n%{http_code}", *post,
                        f"http://127.0.0.1:{MGMT_PORT}{path}"])
    body, code = out.stdout.rsplit("\n", 1)
    return int(code), json.loads(body)


def test_worst_subscribers_by_rtt_and_retransmissions(tb):
    assert tb.addr("l1") == "10.77.1.1" and tb.addr("l2") == "10.77.1.2"
    res = {}
    t = threading.Thread(target=lambda: res.setdefault("flows", traffic.iperf_flows(
        tb, n=2, duration=4, pairs=[("l1", "w1"), ("l2", "w2")], extra_args=("-b", "10M"))))
    t.start()
    time.sleep(3.5)     # the last interval (2 s) inside the uploads
    code, m = get(tb, "/api/v1/measure?by=subscriber&top=5")
    ctl = [PY, str(REPO / "scripts" / "weirctl"), "--url", f"http://127.0.0.1:{MGMT_PORT}"]
    top = tb.run("gw", ctl + ["top", "--count", "1", "--interval", "0.3"]).stdout
    t.join()
    for f in res["flows"]:
        assert f.error is None, f.error
    print(json.dumps(m, indent=1))
    assert code == 200 and m["by"] == "subscriber" and m["subscribers"] == 2, m
    rtt = {u["id"]: u for u in m["worst_rtt"]}
    keys = [u["rtt_ms"] for u in m["worst_rtt"]]
    assert keys == sorted(keys, reverse=True) and "c-l1" in rtt, m
    # A subscriber's figures are over its flows' smoothed round trips sampled in the
    # last interval (each flow's minimum is checked against the path in
    # test_measure.py). The lossy upload can go a while without a sample (a
    # retransmission timeout): then it is ranked by its LAN side only.
    assert 9 <= rtt["c-l1"]["rtt_wan_ms"]["min"] <= 10 * 1.2 + 5, rtt["c-l1"]
    if rtt.get("c-l2", {}).get("rtt_wan_ms"):
        assert 49 <= rtt["c-l2"]["rtt_wan_ms"]["min"] <= 50 * 1.2 + 5, rtt["c-l2"]
        assert [u["id"] for u in m["worst_rtt"]] == ["c-l2", "c-l1"], m
    retx = m["worst_retrans"]
    assert retx and retx[0]["id"] == "c-l2" and retx[0]["retrans_ratio"] > 0 and \
        retx[0]["retrans_segs_out"] > 0, m
    assert "worst RTT" in top and "c-l2" in top, top
    # The same figures beside each subscriber's plan and counters.
    code, u = get(tb, "/api/v1/subscribers/c-l2")
    assert code == 200 and u["tcp"]["retrans_segs_out"] > 0 and u["tcp"]["tcp_flows"] >= 1, u
    code, e = get(tb, "/api/v1/measure?by=host")
    assert code == 400 and "by" in e["error"]["message"], e


def test_capture_of_a_subscriber(tb):
    """A capture filtered by subscriber takes its leaf classes' frames (a ping from its
    LAN host), not another subscriber's; an unknown subscriber is refused; /metrics
    counts the copies."""
    code, c = get(tb, "/api/v1/captures", {"filter": {"subscriber": "c-l2"}, "max_seconds": 2})
    assert code == 201, c
    tb.run("l1", ["ping", "-c", "2", "-i", "0.2", tb.addr("w1")])
    tb.run("l2", ["ping", "-c", "2", "-i", "0.2", tb.addr("w2")])
    time.sleep(2.5)
    code, j = get(tb, f"/api/v1/captures/{c['id']}")
    assert code == 200 and j["state"] == "ended" and j["packets"] >= 4, j
    if not shutil.which("tshark"):
        pytest.skip("needs tshark (scripts/install-deps)")
    pcap = DIRS["d"] / "sub.pcapng"
    tb.run("gw", ["curl", "-sf", "-o", str(pcap), f"http://127.0.0.1:{MGMT_PORT}{j['download']}"])
    rows = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-e", "ip.src", "-e",
                           "ip.dst", "-e", "icmp.type"], capture_output=True, text=True,
                          check=True).stdout.split("\n")
    rows = [r.split("\t") for r in rows if r.strip()]
    # Its frames only (the pings, perhaps the last of its upload's), none of l1's.
    assert all("10.77.1.2" in r[:2] for r in rows), rows
    assert sum(1 for r in rows if r[2] in ("0", "8")) == 4, rows
    code, e = get(tb, "/api/v1/captures", {"filter": {"subscriber": "nobody"}})
    assert code == 422 and "nobody" in e["error"]["message"], e
    metrics = tb.run("gw", ["curl", "-sf", f"http://127.0.0.1:{MGMT_PORT}/metrics"]).stdout
    copied = [float(x.split()[1]) for x in metrics.splitlines()
              if x.startswith("weir_capture_packets_copied_total ")]
    assert copied and copied[0] >= 4 and "weir_captures_running 0" in metrics, metrics[-1500:]

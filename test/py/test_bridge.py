"""weir as a transparent L2 bridge, checked end to end through the testbed:
what crosses (ARP, ICMP v4/v6, UDP, 802.1Q frames, a byte-verified TCP
transfer), what weir counted, and that it shuts down cleanly.

The tests share one module-scoped testbed and run in file order; the last
one stops weir.
"""

import json
import time

import pytest

from weirtb import traffic

BULK_BYTES = 20_000_000
MIN_FRAMES_FOR_BULK = BULK_BYTES // 1500  # each full-sized frame carries < 1500 payload bytes


def neighbour(tb, host, addr):
    out = tb.run(host, ["ip", "-j", "neigh", "show", addr, "dev", "eth0"]).stdout
    entries = json.loads(out or "[]")
    return entries[0] if entries else None


def test_arp_resolves_across_gateway(testbed):
    testbed.run("l1", ["ip", "neigh", "flush", "dev", "eth0"])
    dst = testbed.addr("w2")
    assert neighbour(testbed, "l1", dst) is None or \
        neighbour(testbed, "l1", dst).get("state") in (["FAILED"], ["INCOMPLETE"])
    assert testbed.ping("l1", "w2", count=1).ok
    entry = neighbour(testbed, "l1", dst)
    assert entry is not None, "no neighbour entry for w2 after a ping"
    assert entry.get("lladdr") == traffic.mac_of(testbed, "w2")
    assert set(entry.get("state", [])) & {"REACHABLE", "STALE", "DELAY", "PROBE"}


@pytest.mark.parametrize("src,dst", [("l1", "w1"), ("l2", "w3"), ("w2", "l1")])
def test_icmp_echo_v4(testbed, src, dst):
    r = testbed.ping(src, dst, count=5)
    assert r.ok, r.output
    if testbed.emu == "wanemu":
        # The emulator delays each direction of the WAN host's path.
        wan = dst if dst.startswith("w") else src
        delay = testbed.paths[int(wan[1:]) - 1].delay
        assert r.rtt_avg_ms >= 2 * delay * 0.9, r.output


@pytest.mark.parametrize("src,dst", [("l1", "w2"), ("w1", "l2")])
def test_icmp_echo_v6(testbed, src, dst):
    r = testbed.ping(src, dst, count=5, v6=True)
    assert r.ok, r.output


@pytest.mark.parametrize("src,dst,v6", [("l1", "w1", False), ("w3", "l2", False), ("l2", "w2", True)])
def test_udp_datagrams_cross(testbed, src, dst, v6):
    assert traffic.udp_datagrams(testbed, src, dst, count=200, v6=v6) == 200


@pytest.mark.parametrize("src,dst", [("l1", "w1"), ("w1", "l1")])
def test_vlan_tagged_frames_cross(testbed, src, dst):
    # Frames keep their 802.1Q tag (VID 100) end to end.
    assert traffic.vlan_frames(testbed, src, dst, vid=100, count=10) == 10


def test_vlan_ping(testbed):
    if not testbed.has_vlan_if:
        pytest.skip("kernel without 802.1Q support: no eth0.100 (tagged frames are "
                    "covered by test_vlan_tagged_frames_cross)")
    r = testbed.ping("l1", "10.78.0.2", count=3)
    assert r.ok, r.output


def test_tcp_bulk_sha256(testbed):
    r = testbed.bulk("l1", "w1", nbytes=BULK_BYTES, timeout=90)
    assert r.bytes_received == BULK_BYTES
    assert r.sha256_received == r.sha256_sent


def test_tcp_bulk_sha256_v6_inbound(testbed):
    r = testbed.bulk("w2", "l2", nbytes=BULK_BYTES // 4, port=5301, v6=True, timeout=90)
    assert r.ok, r


def _stats_when(tb, cond, timeout=4.0):
    """weir rewrites its stats file every second: poll until cond holds."""
    deadline = time.monotonic() + timeout
    while True:
        s = tb.weir_stats()
        if cond(s) or time.monotonic() > deadline:
            return s
        time.sleep(0.25)


def test_weir_counters_show_the_frames(testbed):
    if testbed.gateway_running != "weir":
        pytest.skip("gateway is not weir")
    s = _stats_when(testbed, lambda s: s["ports"]["wan"]["tx"] >= MIN_FRAMES_FOR_BULK)
    for port in ("lan", "wan"):
        c = s["ports"][port]
        assert c["rx"] > 0 and c["tx"] > 0 and c["forwarded"] > 0, (port, c)
    # The 20 MB LAN->WAN transfer alone needs this many frames out of the WAN port.
    assert s["ports"]["lan"]["rx"] >= MIN_FRAMES_FOR_BULK
    assert s["ports"]["wan"]["tx"] >= MIN_FRAMES_FOR_BULK
    assert "active" in s["flows"]


def test_weir_exits_zero_on_sigterm(testbed):
    if testbed.gateway_running != "weir":
        pytest.skip("gateway is not weir")
    rc = testbed.stop_gateway()
    log = testbed.log_tail("weir", 40)
    assert rc == 0, log
    assert "final counters" in log
    # With weir gone nothing bridges LAN and WAN any more.
    assert not testbed.ping("l1", "w1", count=1).ok

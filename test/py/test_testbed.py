"""The testbed itself: topology, teardown after a crash, traffic helpers.

These run with Linux bridges in place of weir and the emulator, so they need
neither binary and tell a testbed bug apart from a weir bug.
"""

import json
import os
import subprocess
import sys
import time

import pytest

import weirtb
from weirtb import netns, topology, traffic

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="testbed needs root")

VETHS = {"l1": ["eth0"], "l2": ["eth0"], "w1": ["eth0"], "w2": ["eth0"], "w3": ["eth0"],
         "lan": ["lan-p1", "lan-p2", "lan-up"], "gw": ["gw-lan", "gw-wan"],
         "emu": ["emu-weir", "emu-p1", "emu-p2", "emu-p3"]}


@pytest.fixture(scope="class")
def plain():
    with weirtb.Testbed(gateway="linux-bridge", emu="bridge") as tb:
        yield tb


class TestOneTestbed:
    """Share one testbed; it is torn down before the tests below build their own."""

    def test_every_veth_has_offloads_off_and_mtu_1500(self, plain):
        for host, devs in VETHS.items():
            for dev in devs:
                feats = plain.run(host, ["ethtool", "-k", dev]).stdout
                for f in ("tcp-segmentation-offload", "generic-segmentation-offload",
                          "generic-receive-offload", "tx-checksumming", "rx-checksumming",
                          "rx-vlan-offload", "tx-vlan-offload"):
                    assert f"{f}: off" in feats, (host, dev, f)
                link = json.loads(plain.run(host, ["ip", "-j", "link", "show", dev]).stdout)[0]
                assert link["mtu"] == 1500 and "UP" in link["flags"], (host, dev)


    def test_hosts_have_their_addresses(self, plain):
        out = json.loads(plain.run("w3", ["ip", "-j", "addr", "show", "eth0"]).stdout)[0]
        addrs = {a["local"] for a in out["addr_info"]}
        assert {"10.77.2.3", "fd77::2:3"} <= addrs
        # no DAD: the v6 address is usable at once
        assert not any("tentative" in a for a in out["addr_info"])


    def test_iperf_reports_receiver_intervals_and_retransmits(self, plain):
        res = plain.iperf(n=3, duration=2, cc="reno")
        assert [(r.lan, r.wan) for r in res] == [("l1", "w1"), ("l2", "w2"), ("l1", "w3")]
        for r in res:
            assert r.error is None, r.error
            assert len(r.interval_bps) >= 2 and all(b > 0 for b in r.interval_bps)
            assert r.bytes_received > 0 and r.goodput_bps > 0
            assert r.retransmits is not None
        inbound = plain.iperf(n=1, duration=1, reverse=True)
        assert inbound[0].direction == "in" and inbound[0].bytes_received > 0


    def test_congestion_control_is_per_host(self, plain):
        plain.set_cc("l1", "reno")
        plain.set_cc("l2", "cubic")
        get = lambda h: plain.run(h, ["sysctl", "-n", "net.ipv4.tcp_congestion_control"]).stdout.strip()
        assert (get("l1"), get("l2")) == ("reno", "cubic")


    def test_bulk_detects_nothing_wrong_on_a_clean_path(self, plain):
        r = plain.bulk("l2", "w3", nbytes=3_000_000)
        assert r.ok and r.sha256_sent != "" and r.bytes_received == 3_000_000


def test_down_after_a_crash_removes_namespaces_and_processes():
    # A CLI `up` in a process that then dies, plus a stray process in a host.
    cli = [sys.executable, str(topology.REPO / "scripts" / "testbed")]
    subprocess.run(cli + ["up", "--gateway", "linux-bridge", "--emu", "bridge", "--lan", "1",
                          "--wan", "1"], check=True, capture_output=True, timeout=60)
    stray = subprocess.Popen(netns.in_ns("l1", ["sleep", "300"]))
    assert set(netns.list_ns()) == {netns.PREFIX + h for h in ("l1", "w1", "lan", "gw", "emu")}
    # `up` of a new testbed first clears the leftovers ...
    with weirtb.Testbed(lan=1, wan=2, gateway="linux-bridge", emu="bridge") as tb:
        assert stray.wait(timeout=5) is not None
        assert netns.PREFIX + "w2" in netns.list_ns()
        assert tb.ping("l1", "w2", count=1).ok
    # ... and leaving the context removes everything.
    assert netns.list_ns() == []
    assert topology.read_state() is None


def test_up_refuses_a_testbed_another_live_process_owns():
    owner = subprocess.Popen(["sleep", "60"])
    try:
        tb = weirtb.Testbed(lan=1, wan=1, gateway="linux-bridge", emu="bridge")
        tb.up()
        tb.owner_pid = owner.pid
        tb._save_state()
        with pytest.raises(weirtb.TestbedError, match="in use by pid"):
            weirtb.Testbed(lan=1, wan=1, gateway="linux-bridge", emu="bridge").up()
        assert netns.list_ns(), "the refused up must not have torn the testbed down"
    finally:
        owner.kill()
        owner.wait()
        weirtb.down()
    assert netns.list_ns() == []


def test_lan_access_links_add_their_delay_per_host():
    """lan_paths: each LAN host reaches weir over its own emulated access link
    (the seeds' senders sit 10-20 ms from the gateway), through weir as usual."""
    lan = [weirtb.PathSpec(delay=20), weirtb.PathSpec(delay=2)]
    with weirtb.Testbed(lan=2, wan=1, gateway="linux-bridge", paths=[weirtb.PathSpec(delay=5)],
                        lan_paths=lan) as tb:
        far, near = tb.ping("l1", "w1", count=5), tb.ping("l2", "w1", count=5)
        assert far.ok and near.ok, (far, near)
        # Round trip = 2 x (access + path) one-way delays, plus a little.
        assert 50 <= far.rtt_avg_ms < 65, far
        assert 14 <= near.rtt_avg_ms < 29, near
        assert 30 <= far.rtt_avg_ms - near.rtt_avg_ms < 42, (far, near)
        st = tb.wanemu_stats(role="lanemu")
        assert len(st["paths"]) == 2, st

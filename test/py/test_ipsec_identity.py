"""An IPsec SA's identity in GET /api/v1/ipsec and the stats file (issue 36.9b,
docs/ipsec.md): SAs that differ only in their VLAN, or (ESP in UDP 4500) only in
their UDP ports, are different SAs, listed apart, never one overwriting the other.

Frames from a pcap through weir on net_pcap ports (no namespaces): an ESP SA
untagged and the same SA (addresses, SPI) on VLAN 10; two ESP-in-UDP SAs with one
SPI from two hosts behind one NAT (source ports 61000 and 61001), and their
inbound SAs, which the two hosts gave the same SPI."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build"))
WEIR = BUILD / "app" / "weir" / "weir"

sys.path.insert(0, str(REPO / "scripts"))
from weirtb import weir_config_text  # noqa: E402

LAN, WAN = "10.0.0.1", "192.0.2.1"


def frames():
    from scapy.layers.inet import IP, UDP
    from scapy.layers.ipsec import ESP
    from scapy.layers.l2 import Dot1Q, Ether
    from scapy.packet import Raw

    eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    body = Raw(bytes(range(32)))
    out = []
    for seq in (1, 2, 3):
        out.append(eth / IP(src=LAN, dst=WAN) / ESP(spi=0x1001, seq=seq) / body)
        out.append(eth / Dot1Q(vlan=10) / IP(src=LAN, dst=WAN) / ESP(spi=0x1001, seq=seq) / body)
        for port in (61000, 61001):
            out.append(eth / IP(src=LAN, dst=WAN) / UDP(sport=port, dport=4500) /
                       ESP(spi=0x2002, seq=seq) / body)
            out.append(eth / IP(src=WAN, dst=LAN) / UDP(sport=4500, dport=port) /
                       ESP(spi=0xc001, seq=seq) / body)
    return [bytes(f) for f in out]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="weir on net_pcap ports is run as root")
@pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}")
def test_sa_identity_vlan_and_natt_ports(tmp_path):
    from scapy.utils import wrpcap
    from scapy.layers.l2 import Ether

    inp, empty = tmp_path / "in.pcap", tmp_path / "empty.pcap"
    wrpcap(str(inp), [Ether(f) for f in frames()], linktype=1)
    wrpcap(str(empty), [], linktype=1)
    n = len(frames())
    stats, cfg, port = tmp_path / "stats.json", tmp_path / "weir.cfg", free_port()
    cfg.write_text(weir_config_text(f"net_pcap0,rx_pcap={inp},tx_pcap={tmp_path / 'lan_out.pcap'}",
                                    f"net_pcap1,rx_pcap={empty},tx_pcap={tmp_path / 'out.pcap'}",
                                    prefix=f"wsaid-{os.getpid()}",
                                    body="stats = { interval = 0.2; };\n"
                                         f"management = {{ port = {port}; }};\n"))
    p = subprocess.Popen([str(WEIR), "--", "--config", str(cfg), "--stats-file", str(stats)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        data, deadline = None, time.time() + 30
        while time.time() < deadline and p.poll() is None:
            if stats.exists():
                try:
                    data = json.loads(stats.read_text())
                except json.JSONDecodeError:
                    data = None     # caught mid-write
                if data is not None and data["ports"]["lan"]["rx"] >= n and \
                        data["ipsec"]["sas_active"] > 0:
                    break
            time.sleep(0.1)
        assert p.poll() is None, "weir exited"
        # One more snapshot: the SAs' records are read after the frames.
        time.sleep(0.5)
        data = json.loads(stats.read_text())
        status, body = get(port, "/api/v1/ipsec")
        assert status == 200, body
        rest = json.loads(body)
        status, metrics = get(port, "/metrics")
        assert status == 200
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)

    # The REST reply is the same object as the stats file's (both ipsec.c).
    assert sorted(rest["sa"]) == sorted(data["ipsec"]["sa"]) and \
        sorted(rest["tunnels"]) == sorted(data["ipsec"]["tunnels"]), rest
    ip = data["ipsec"]
    lan = data["ports"]["lan"]
    assert lan["malformed"] == 0 and lan["ipsec"]["pkts"] == n, lan
    # Six SAs: ESP untagged and on VLAN 10, two outbound and two inbound ESP in UDP.
    assert ip["sas_active"] == 6, ip
    assert ip["sas_listed"] == 6 and len(ip["sa"]) == 6, sorted(ip["sa"])
    for name, sa in ip["sa"].items():
        assert sa["pkts"] == 3 and sa["lost"] == 0 and sa["dup"] == 0 and sa["resync"] == 0, \
            (name, sa)
    esp = [sa for sa in ip["sa"].values() if sa["proto"] == "esp"]
    assert sorted(sa["vlan"] for sa in esp) == [0, 10]
    natt = [sa for sa in ip["sa"].values() if sa["proto"] == "esp-udp"]
    assert sorted((sa["sport"], sa["dport"]) for sa in natt) == \
        [(4500, 61000), (4500, 61001), (61000, 4500), (61001, 4500)]
    for name in ("10.0.0.1>192.0.2.1 0x00001001", "10.0.0.1>192.0.2.1 0x00001001 vlan 10",
                 "10.0.0.1:61000>192.0.2.1:4500 0x00002002",
                 "192.0.2.1:4500>10.0.0.1:61001 0x0000c001"):
        assert name in ip["sa"], sorted(ip["sa"])
    # /metrics: one series per SA (labels with the VLAN and the ports).
    series = [l.split(" ")[0] for l in metrics.splitlines()
              if l.startswith("weir_ipsec_sa_packets_total{")]
    assert len(series) == 6 and len(set(series)) == 6, series
    assert 'weir_ipsec_sa_packets_total{src="10.0.0.1",dst="192.0.2.1",spi="0x00002002",' \
        'vlan="0",sport="61001",dport="4500"}' in series, series
    # Tunnels: the untagged one, VLAN 10's, and one per NAT-T association, each
    # pairing its two directions.
    tun = ip["tunnels"]
    assert len(tun) == 4, sorted(tun)
    assert sorted(t["sas"] for t in tun.values()) == [1, 1, 2, 2], tun
    assert "10.0.0.1:61000<>192.0.2.1:4500" in tun and "10.0.0.1<>192.0.2.1 vlan 10" in tun, \
        sorted(tun)
    tl = [l.split(" ")[0] for l in metrics.splitlines()
          if l.startswith("weir_ipsec_tunnel_loss_ratio{")]
    assert len(tl) == 4 and len(set(tl)) == 4, tl

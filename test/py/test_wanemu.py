"""weir-wanemu, the testbed's WAN emulator, against real traffic between network namespaces:

    wemx-a (10.99.0.1) --veth-- wemx-e [weir-wanemu: --weir e0, paths p1, p2] --veth-- wemx-b1 (10.99.0.2)
                                                                            \\--veth-- wemx-b2 (10.99.0.3)

Each test starts the emulator with its own path parameters and checks what the hosts see
(ping RTT, datagrams received and their order, TCP goodput) and the emulator's counters."""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build"))
WANEMU = BUILD / "app" / "wanemu" / "weir-wanemu"
NS = {"a": "wemx-a", "e": "wemx-e", "b1": "wemx-b1", "b2": "wemx-b2"}
IP = {"a": "10.99.0.1", "b1": "10.99.0.2", "b2": "10.99.0.3"}
OFFLOADS = ["tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx", "off"]

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(not WANEMU.exists(), reason=f"weir-wanemu not built at {WANEMU}"),
]


def sh(*args, check=True, timeout=60, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=timeout, **kw)


def nsx(host, *args, **kw):
    return sh("ip", "netns", "exec", NS[host], *args, **kw)


def teardown():
    for ns in NS.values():
        sh("ip", "netns", "del", ns, check=False)


@pytest.fixture(scope="module")
def net():
    teardown()
    try:
        for ns in NS.values():
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            # No IPv6 chatter (ND, MLD): the counters then see only the test's frames.
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
               "net.ipv6.conf.default.disable_ipv6=1")
        links = [("a", "eth0", "e", "e0"), ("b1", "eth0", "e", "p1"), ("b2", "eth0", "e", "p2")]
        for h, hif, e, eif in links:
            sh("ip", "link", "add", f"wx-{h}", "netns", NS[h], "type", "veth", "peer", "name", f"wx-{eif}",
               "netns", NS[e])
            sh("ip", "-n", NS[h], "link", "set", f"wx-{h}", "name", hif)
            sh("ip", "-n", NS[e], "link", "set", f"wx-{eif}", "name", eif)
            for ns, dev in ((NS[h], hif), (NS[e], eif)):
                sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, *OFFLOADS, check=False)
                sh("ip", "-n", ns, "link", "set", dev, "up")
        macs = {}
        for h in ("a", "b1", "b2"):
            sh("ip", "-n", NS[h], "addr", "add", f"{IP[h]}/24", "dev", "eth0")
            macs[h] = json.loads(sh("ip", "-n", NS[h], "-j", "link", "show", "eth0").stdout)[0]["address"]
        # Static neighbours: ARP through a lossy path would make the tests measure ARP.
        for h in macs:
            for o in macs:
                if h != o:
                    sh("ip", "-n", NS[h], "neigh", "replace", IP[o], "lladdr", macs[o], "dev", "eth0",
                       "nud", "permanent")
        yield macs
    finally:
        teardown()


class Emu:
    def __init__(self, tmp_path, *paths):
        self.stats = tmp_path / "emu.json"
        argv = ["ip", "netns", "exec", NS["e"], str(WANEMU), "--weir", "e0", "--seed", "7",
                "--stats", str(self.stats), "--stats-interval", "0.1"]
        for p in paths:
            argv += ["--path", p]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)
        assert self.proc.poll() is None, self.proc.communicate()[1]

    def counters(self):
        time.sleep(0.25)
        return json.loads(self.stats.read_text())["paths"]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=10)
        return self.proc.returncode, out, err


@pytest.fixture
def emu(net, tmp_path):
    started = []

    def start(*paths):
        e = Emu(tmp_path, *paths)
        started.append(e)
        return e
    yield start
    for e in started:
        if e.proc.poll() is None:
            e.stop()


def ping_rtts(src, dst, count=20):
    out = nsx(src, "ping", "-c", str(count), "-i", "0.05", "-W", "2", IP[dst], timeout=30).stdout
    return [float(line.split("time=")[1].split()[0]) for line in out.splitlines() if "time=" in line]


RECEIVER = """
import socket, sys, json
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 9999)); s.settimeout(float(sys.argv[1]))
seqs = []
try:
    while True:
        seqs.append(int(s.recv(64).split(b" ")[0]))
except socket.timeout:
    pass
print(json.dumps(seqs))
"""

SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n, gap = int(sys.argv[2]), float(sys.argv[3])
for i in range(n):
    s.sendto(b"%d wanemu-test" % i, (sys.argv[1], 9999))
    time.sleep(gap)
"""


def udp_run(src, dst, n, gap=0.0005, wait=1.5):
    rx = subprocess.Popen(["ip", "netns", "exec", NS[dst], sys.executable, "-c", RECEIVER, str(wait)],
                          stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    nsx(src, sys.executable, "-c", SENDER, IP[dst], str(n), str(gap), timeout=60)
    out, _ = rx.communicate(timeout=60)
    return json.loads(out)


def test_rtt_matches_configured_delay_per_path(emu):
    emu("p1,delay=10", "p2,delay=25")
    # Both paths at once: each host sees its own path's delay.
    rtt1, rtt2 = ping_rtts("a", "b1"), ping_rtts("a", "b2")
    assert len(rtt1) >= 18 and len(rtt2) >= 18
    assert abs(statistics.median(rtt1) - 20.0) < 1.0, rtt1
    assert abs(statistics.median(rtt2) - 50.0) < 1.0, rtt2


def test_random_loss_within_binomial_bounds(emu):
    e = emu("p1,loss=10,loss_dir=to_path", "p2")
    n = 2000
    got = udp_run("a", "b1", n)
    lost = n - len(got)
    # 99.9 % two-sided bound of Binomial(2000, 0.1): mean 200, sd 13.4, z = 3.29.
    assert 156 <= lost <= 244, lost
    c = e.counters()["p1"]["to_path"]
    # The counters agree with the receiver (other frames, e.g. IPv6 ND, may share the path).
    assert c["dropped_random"] >= lost and c["tx"] >= len(got)
    assert c["rx"] == c["tx"] + c["dropped_random"]
    assert e.counters()["p1"]["to_weir"]["dropped_random"] == 0     # loss_dir honoured


def test_periodic_loss_drops_every_nth(emu):
    e = emu("p1,ploss=40", "p2")
    got = udp_run("a", "b1", 2000)
    c = e.counters()["p1"]["to_path"]
    assert c["dropped_periodic"] == c["rx"] // 40
    assert len(got) == 2000 - c["dropped_periodic"]
    # The 40th, 80th ... datagrams are the ones missing.
    assert [i for i in range(2000) if i not in set(got)] == list(range(39, 2000, 40))


def test_jitter_never_reorders(emu):
    e = emu("p1,delay=10,jitter=5", "p2")
    got = udp_run("a", "b1", 1000, gap=0.0002)
    assert len(got) == 1000
    assert got == sorted(got)
    assert e.counters()["p1"]["to_path"]["tx"] >= 1000


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed")
def test_rate_limits_tcp_goodput(emu):
    emu("p1,rate=10mbit,limit=100", "p2")
    srv = subprocess.Popen(["ip", "netns", "exec", NS["b1"], "iperf3", "-s", "-1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = nsx("a", "iperf3", "-c", IP["b1"], "-t", "5", "-J", timeout=60).stdout
    finally:
        srv.wait(timeout=10)
    mbit = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    # 10 Mbit/s on the wire less Ethernet/IP/TCP overhead (~5 %).
    assert 8.5 <= mbit <= 10.0, mbit


def test_sigterm_exits_cleanly_with_stats(emu):
    e = emu("p1", "p2")
    ping_rtts("a", "b1", count=3)
    rc, out, _ = e.stop()
    assert rc == 0
    stats = json.loads(out)
    assert stats["paths"]["p1"]["to_path"]["tx"] >= 3


@pytest.mark.parametrize("args,named", [
    (["--weir", "x", "--path", "y,delay=abc"], "delay=abc"),
    (["--weir", "x", "--path", "y,colour=blue"], "colour=blue"),
    (["--weir", "x", "--path", "y,rate=10furlongs"], "rate=10furlongs"),
    (["--weir", "x", "--path", "y,loss=101"], "loss=101"),
    (["--weir", "x"], "--path"),
    (["--path", "y"], "--weir"),
    (["--weir", "x", "--path", "y", "--bogus"], "--bogus"),
])
def test_bad_arguments_exit_2_naming_them(args, named):
    p = sh(str(WANEMU), *args, check=False)
    assert p.returncode == 2
    assert named in p.stderr, p.stderr

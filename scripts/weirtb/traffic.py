"""Traffic over the testbed: ping, iperf3 TCP flows, byte-verified bulk transfer.

All measurements are taken at the receiver (goodput = bytes the application
read), because what the sender wrote includes what was lost and resent.
"""

import json
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .netns import CommandError

BULK_SCRIPT = Path(__file__).with_name("bulk.py")
PYTHON = "/usr/bin/python3"  # Debian's interpreter: the one the project standardises on


# ----- ping ---------------------------------------------------------------
@dataclass
class PingResult:
    sent: int
    received: int
    rtt_avg_ms: float | None
    output: str

    @property
    def ok(self):
        return self.sent > 0 and self.received == self.sent


def _dst_addr(tb, dst, v6=False):
    """A host name ('w1') or a literal address."""
    return tb.addr(dst, v6=v6) if re.fullmatch(r"[lw]\d+", dst) else dst


def ping(tb, src, dst, count=3, v6=False, interval=0.2, timeout=20):
    addr = _dst_addr(tb, dst, v6)
    argv = ["ping", "-6" if v6 or ":" in addr else "-4", "-n", "-c", str(count),
            "-i", str(interval), "-W", "2", addr]
    cp = tb.run(src, argv, check=False, timeout=timeout)
    m = re.search(r"(\d+) packets transmitted, (\d+) received", cp.stdout)
    rtt = re.search(r"= [\d.]+/([\d.]+)/", cp.stdout)
    return PingResult(int(m.group(1)) if m else 0, int(m.group(2)) if m else 0,
                      float(rtt.group(1)) if rtt else None, cp.stdout + cp.stderr)


# ----- iperf3 ---------------------------------------------------------------
@dataclass
class FlowResult:
    flow: int
    lan: str
    wan: str
    direction: str           # 'out' (LAN->WAN) or 'in' (WAN->LAN)
    cc: str | None
    interval_bps: list = field(default_factory=list)  # receiver goodput per interval
    goodput_bps: float = 0.0  # receiver bytes * 8 / duration
    retransmits: int | None = None
    mean_rtt_ms: float | None = None   # the sender's smoothed RTT (iperf3, Linux), when known
    bytes_received: int = 0
    seconds_received: float = 0.0   # how long the receiver saw the test run
    error: str | None = None

    @property
    def sender(self):
        return self.lan if self.direction == "out" else self.wan

    @property
    def receiver(self):
        return self.wan if self.direction == "out" else self.lan


def jain(xs):
    """Jain's fairness index of xs: 1 when all are equal, 1/n when one has everything
    (0 when all are zero)."""
    xs = list(xs)
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


def steady_bps(ivs, start, stop=None):
    """Mean of a flow's per-interval goodput ivs[start:stop], without the window's first
    boundary splitting a stall. A receiver that did not read for a while (a busy VM) counts
    an interval low and the next one high by the same bytes; a window that starts between
    the two reads high (8 pfq flows read 1.054 of what the class can carry). If the first
    interval in the window is high and the one before it low (against the window's
    median), the window starts one earlier and takes the pair whole."""
    xs = ivs[start:stop]
    if not xs:
        return 0.0
    med = sorted(xs)[len(xs) // 2]
    if 0 < start < len(ivs) and ivs[start] > 1.2 * med and ivs[start - 1] < 0.8 * med:
        start -= 1
        xs = ivs[start:stop]
    return sum(xs) / len(xs)


def default_pairs(tb, n):
    """Flow i goes from LAN host i mod N to WAN host i mod M, so n >= M flows
    cover every WAN path (with the paper's 10/50/150 ms RTTs)."""
    return [(tb.lan_hosts[i % tb.nlan], tb.wan_hosts[i % tb.nwan]) for i in range(n)]


def _wait_listening(tb, host, port, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cp = tb.run(host, ["ss", "-Hltn", f"sport = :{port}"], check=False)
        if cp.stdout.strip():
            return
        time.sleep(0.05)
    raise CommandError(f"iperf3 server on {host}:{port} not listening after {timeout}s")


def iperf_flows(tb, n=4, duration=10, reverse=False, cc=None, pairs=None, interval=1.0,
                base_port=5201, v6=False, extra_args=(), cports=None):
    """Run n concurrent iperf3 TCP flows for `duration` seconds.

    Servers run on WAN hosts and clients on LAN hosts; reverse=True makes the
    WAN side send (inbound traffic, iperf3 -R). cc is a congestion control
    name for every flow, or a list with one per flow (iperf3 -C sets it on the
    sender's socket). cports: the LAN host's TCP port of each flow's data
    connection (iperf3 --cport), e.g. to put it on a chosen worker of weir.
    Returns one FlowResult per flow.
    """
    pairs = pairs or default_pairs(tb, n)
    ccs = cc if isinstance(cc, (list, tuple)) else [cc] * len(pairs)
    from .topology import allow_congestion_control
    for c in set(ccs) - {None}:
        allow_congestion_control(c)   # iperf3 -C obeys the same allowed list
    servers, clients, results = [], [], []
    try:
        for i, (lan, wan) in enumerate(pairs):
            port = base_port + i
            servers.append(tb.popen(wan, ["iperf3", "-s", "-1", "-p", str(port), "-J"]))
        for i, (lan, wan) in enumerate(pairs):
            _wait_listening(tb, wan, base_port + i)
        for i, (lan, wan) in enumerate(pairs):
            argv = ["iperf3", "-c", _dst_addr(tb, wan, v6), "-p", str(base_port + i),
                    "-t", str(duration), "-i", str(interval), "-J", "--get-server-output"]
            if reverse:
                argv.append("-R")
            if ccs[i]:
                argv += ["-C", ccs[i]]
            if cports:
                argv += ["--cport", str(cports[i])]
            argv += list(extra_args)
            clients.append(tb.popen(lan, argv))
        for i, (lan, wan) in enumerate(pairs):
            try:
                out, err = clients[i].communicate(timeout=duration + 30)
            except subprocess.TimeoutExpired:
                clients[i].kill()
                out, err = clients[i].communicate()
            results.append(_parse_flow(i, lan, wan, reverse, ccs[i], out, err, interval))
    finally:
        for p in servers + clients:
            if p.poll() is None:
                p.kill()
            p.communicate()
    return results


def _parse_flow(i, lan, wan, reverse, cc, out, err, interval):
    r = FlowResult(i, lan, wan, "in" if reverse else "out", cc)
    try:
        j = json.loads(out)
    except json.JSONDecodeError:
        r.error = (err or out or "no output").strip()[-300:]
        return r
    if j.get("error"):
        r.error = j["error"]
    # In -R mode the client receives, so its own intervals are receiver-side;
    # otherwise the server is the receiver and its report rides along in
    # server_output_json (--get-server-output).
    rx = j if reverse else j.get("server_output_json", {})
    # The receiver's last interval can be a sliver (it runs on briefly after
    # the sender stops); a rate over a few milliseconds is noise, drop it.
    r.interval_bps = [iv["sum"]["bits_per_second"] for iv in rx.get("intervals", [])
                      if iv["sum"]["seconds"] >= 0.5 * interval]
    end = j.get("end", {})
    recv = end.get("sum_received", {})
    r.bytes_received = recv.get("bytes", 0)
    r.seconds_received = recv.get("seconds", 0.0)
    r.goodput_bps = recv.get("bits_per_second", 0.0)
    r.retransmits = end.get("sum_sent", {}).get("retransmits")
    # The sender's view of the round trip (queueing at the gateway included):
    # the client's own streams when it sends, the server's report with -R.
    tx = (j.get("server_output_json", {}) if reverse else j).get("end", {})
    rtts = [st["sender"]["mean_rtt"] for st in tx.get("streams", [])
            if "sender" in st and "mean_rtt" in st["sender"]]
    if rtts:
        r.mean_rtt_ms = sum(rtts) / len(rtts) / 1000.0
    return r


def format_flows(results):
    """A plain-text table, one row per flow, goodput in Mbit/s."""
    lines = [f"{'flow':>4} {'from':>4} {'to':>4} {'cc':>6} {'Mbit/s':>9} {'retr':>6}  per-interval Mbit/s"]
    for r in results:
        ivs = " ".join(f"{b / 1e6:.1f}" for b in r.interval_bps)
        lines.append(f"{r.flow:>4} {r.sender:>4} {r.receiver:>4} {r.cc or '-':>6} "
                     f"{r.goodput_bps / 1e6:>9.2f} {r.retransmits if r.retransmits is not None else '-':>6}  "
                     + (f"ERROR {r.error}" if r.error else ivs))
    total = sum(r.goodput_bps for r in results)
    lines.append(f"{'sum':>4} {'':>4} {'':>4} {'':>6} {total / 1e6:>9.2f}")
    return "\n".join(lines)


# ----- bulk transfer with byte verification -----------------------------------
@dataclass
class BulkResult:
    bytes_sent: int
    bytes_received: int
    sha256_sent: str
    sha256_received: str
    seconds: float

    @property
    def ok(self):
        return self.bytes_sent == self.bytes_received and self.sha256_sent == self.sha256_received

    @property
    def mbit_s(self):
        return self.bytes_received * 8 / self.seconds / 1e6 if self.seconds else 0.0


def bulk_transfer(tb, src="l1", dst="w1", nbytes=20_000_000, port=5300, v6=False, timeout=60,
                  pause=0, addr=None):
    """Send nbytes of random data over one TCP connection from src to dst and
    return both ends' byte counts and sha256 digests. pause: the receiver
    waits that many seconds before it reads (its window closes). addr: connect
    to this address of dst instead of its testbed one (a tunnel's inner address)."""
    addr = addr or _dst_addr(tb, dst, v6)
    bind = "::" if ":" in addr else "0.0.0.0"
    rx = tb.popen(dst, [PYTHON, str(BULK_SCRIPT), "recv", "--bind", bind, "--port", str(port),
                        "--timeout", str(timeout), "--pause", str(pause)])
    try:
        ready = rx.stdout.readline().strip()
        if ready != "READY":
            raise CommandError(f"bulk receiver did not start: {ready} {rx.stderr.read()}")
        tx = tb.run(src, [PYTHON, str(BULK_SCRIPT), "send", "--host", addr, "--port", str(port),
                          "--bytes", str(nbytes), "--timeout", str(timeout)],
                    timeout=timeout + 10)
        out, err = rx.communicate(timeout=timeout)
        if rx.returncode != 0:
            raise CommandError(f"bulk receiver failed: {err.strip()[-500:]}")
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.communicate()
    s, r = json.loads(tx.stdout), json.loads(out)
    return BulkResult(s["bytes"], r["bytes"], s["sha256"], r["sha256"], s["seconds"])


# ----- datagrams and tagged frames ---------------------------------------------
PROBE_SCRIPT = Path(__file__).with_name("probe.py")


def _start_ready(tb, host, argv):
    p = tb.popen(host, [PYTHON, str(PROBE_SCRIPT)] + argv)
    line = p.stdout.readline().strip()
    if line != "READY":
        p.kill()
        raise CommandError(f"probe on {host} did not start: {line} {p.stderr.read()[-500:]}")
    return p


def _finish(p, timeout):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    if p.returncode != 0:
        raise CommandError(f"probe failed: {err.strip()[-500:]}")
    return json.loads(out)


PINGPONG_SCRIPT = Path(__file__).with_name("pingpong.py")


class LightConnection:
    """A light TCP connection src -> dst (pingpong.py) for `secs` seconds, in the
    background: `with LightConnection(...) as c: ...; n = c.round_trips()`. The server
    is killed on the way out whatever happened."""

    def __init__(self, tb, src, dst, port, cport=0, secs=10.0, v6=False):
        self.tb, self.src, self.dst, self.port = tb, src, dst, port
        self.cport, self.secs, self.v6 = cport, secs, v6
        self.srv = self.talk = None

    def __enter__(self):
        self.srv = self.tb.popen(self.dst, [PYTHON, str(PINGPONG_SCRIPT), "serve", str(self.port)])
        try:
            line = self.srv.stdout.readline().strip()
            if line != "READY":
                raise CommandError(f"pingpong on {self.dst} did not start: {line}")
            self.talk = self.tb.popen(self.src, [PYTHON, str(PINGPONG_SCRIPT), "talk",
                                                 _dst_addr(self.tb, self.dst, self.v6),
                                                 str(self.port), str(self.cport), str(self.secs)])
        except BaseException:
            self._stop_server()
            raise
        return self

    def round_trips(self):
        """Wait for the talker to finish; the round trips it made."""
        out, _ = self.talk.communicate(timeout=self.secs + 10)
        return int(out or 0)

    def _stop_server(self):
        if self.srv.poll() is None:
            self.srv.kill()
        self.srv.communicate()

    def __exit__(self, *exc):
        if self.talk is not None and self.talk.poll() is None:
            self.talk.kill()
            self.talk.communicate()
        self._stop_server()


def udp_datagrams(tb, src="l1", dst="w1", count=100, size=512, port=5400, v6=False):
    """Send `count` UDP datagrams src->dst; returns how many arrived."""
    addr = _dst_addr(tb, dst, v6)
    rx = _start_ready(tb, dst, ["udp-recv", "--bind", "::" if ":" in addr else "0.0.0.0",
                                "--port", str(port), "--timeout", "10"])
    tb.run(src, [PYTHON, str(PROBE_SCRIPT), "udp-send", "--host", addr, "--port", str(port),
                 "--count", str(count), "--size", str(size)], timeout=30)
    return _finish(rx, 20)["count"]


def mac_of(tb, host, dev="eth0"):
    return json.loads(tb.run(host, ["ip", "-j", "link", "show", dev]).stdout)[0]["address"]


def vlan_frames(tb, src="l1", dst="w1", vid=100, count=10, token=None):
    """Inject `count` 802.1Q frames (VID vid) at src's eth0 addressed to dst's
    MAC; returns how many dst's eth0 saw with the same VID and payload."""
    token = token or f"weirtb-{time.monotonic_ns()}"
    rx = _start_ready(tb, dst, ["vlan-sniff", "--vid", str(vid), "--token", token,
                                "--count", str(count), "--timeout", "10"])
    tb.run(src, [PYTHON, str(PROBE_SCRIPT), "vlan-send", "--vid", str(vid), "--token", token,
                 "--count", str(count), "--dst", mac_of(tb, dst)], timeout=30)
    return _finish(rx, 20)["count"]

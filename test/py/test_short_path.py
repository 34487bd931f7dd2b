"""Short transfers beside bulk flows on a short path (issue 23 item 3), with real TCP.

At 10 ms a 100 KB reply is bound by the rate it gets, not by its round trips, so this is
where the new-flows list's bound and any ACK holding of a young flow show. Its own
module: a second testbed beside test_short_transfers.py's would share its DPDK prefix.
"""
import re
import time

import pytest

from conftest import measure_twice
from weirtb import traffic
from test_short_transfers import (PAYLOAD_MAX, http_testbed, pfq_uploads_rtt, restart,
                                  short_beside_bulk)


@pytest.fixture(scope="module")
def st_tb10(tmp_path_factory):
    with http_testbed(tmp_path_factory.mktemp("short10"), 10) as tb:
        yield tb


@pytest.mark.parametrize("mode", ["pfq", "postack", "postack-paced", "tcr", "ipabr"])
def test_short_download_beside_bulk_short_path(st_tb10, mode):
    """At 10 ms a 100 KB reply is bound by its rate, not its round trips: beside 4 bulk
    downloads it took 1.32x its idle time (90 against 68 ms) while the new-flows list
    could take only half of the leaf, and postack 1.8x (122 ms) while it held a young
    flow's ACKs to its 1/5 share's BDP. With new_quanta = 3 (3/4 of the leaf) and young
    flows' ACKs let go: 79-80 ms, 1.17x (issue 23 item 3's goal: 1.2x). ipabr took 6x
    (412 ms): its windows were sized to a WAN half its request's window had cut to 3-5
    ms, and to 1/5 of the class; 1.16x since (docs/ipabr.md)."""
    idle, loaded = measure_twice(lambda: short_beside_bulk(st_tb10, mode),
                                 lambda r: r[1] <= 1.25 * r[0])
    assert loaded <= 1.25 * idle, (idle, loaded)


def test_ipabr_bulk_downloads_fill_the_class_from_the_start(st_tb10):
    """4 bulk downloads in ipabr at 10 ms fill the class from their first seconds. Their
    first sender-side round-trip sample came from iperf3's cookie's window (data already
    on its way): the 10 ms WAN half read 3-5 ms and took ~10 s to recover, the flows ran
    at 1.6 of their 4.4 Mbit/s (docs/ipabr.md, the ACK clock): seconds 1-5 carried about
    0.55 of what the class carries."""
    restart(st_tb10, "ipabr")

    def run():
        flows = traffic.iperf_flows(st_tb10, n=4, duration=6, reverse=True, cc="cubic",
                                    pairs=[("l2", "w1")] * 4, base_port=5301)
        assert all(f.error is None for f in flows), flows
        return sum(sum(f.interval_bps[1:6]) / len(f.interval_bps[1:6]) for f in flows)

    bps = measure_twice(run, lambda b: b >= 0.85 * PAYLOAD_MAX)
    print(f"4 ipabr downloads, seconds 1-5: {bps / 1e6:.2f} Mbit/s, "
          f"{bps / PAYLOAD_MAX:.3f} of the class")
    assert bps >= 0.85 * PAYLOAD_MAX, bps


@pytest.mark.parametrize("mode", ["pfq", "postack", "tcr"])
def test_short_download_beside_many_young_bulk_flows(st_tb10, mode):
    """Youth is bounded in time (docs/cbq.md): a flow active for more than a few activity
    periods is old, whatever it has sent. With young_bytes = 1 MiB, 16 bulk downloads
    at 1.2 Mbit/s each need 7 s to send their budgets, so by bytes alone all were still
    young when a 100 KB download started 3 s in: it was one young flow in 17 (the same
    as 64 flows with the default 256 KiB, where 100 KB took 0.7-1.5 s against 70 ms
    idle under pfq)."""
    idle, loaded = measure_twice(
        lambda: short_beside_bulk(st_tb10, mode, n=16, duration=7, reps=3,
                                  extra="young_bytes = 1048576;"),
        lambda r: r[1] <= 1.5 * r[0])
    cls = st_tb10.weir_stats()["shaping"]["inbound"]["classes"]
    spent = sum(c.get("young_spent", 0) for c in cls.values())
    print(f"{mode}: 100 KB idle {idle * 1000:.0f} ms, beside 16 young bulk downloads "
          f"{loaded * 1000:.0f} ms; inbound young_spent {spent}")
    assert loaded <= 1.5 * idle, (idle, loaded)
    assert spent >= 16, spent


@pytest.mark.parametrize("mode", ["pfq", "tcr"])
def test_short_downloads_soon_after_64_bulk_flows_start(st_tb10, mode):
    """64 bulk downloads started 3 s before: every one of three 100 KB downloads right
    after takes within 1.5x its idle time. The bulk flows' youth ran out in time, but
    each kept the 256 KiB budget it was listed with on the new list while its queue
    stayed backlogged, so for 6.7 s a reply was one flow among 60 there: 0.26-1.9 s
    against 69 ms under pfq (weir_drr_youth_end). 64 iperf3 processes, not 4 of 16
    streams: one process's 16 streams did not show it."""
    idle, worst = measure_twice(
        lambda: short_beside_bulk(st_tb10, mode, n=64, duration=8, reps=3, stat=max),
        lambda r: r[1] <= 1.5 * r[0])
    assert worst <= 1.5 * idle, (idle, worst)


# Run in a LAN host: GET /100k on one HTTP/1.1 connection, sleeping `gap` seconds
# between requests; prints each request's seconds (first byte of the request to the
# last of the reply), the handshake left out.
KEEPALIVE = r"""
import http.client, sys, time
host, port, n, gap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
c = http.client.HTTPConnection(host, port, timeout=30)
c.connect()
out = []
for i in range(n):
    if i:
        time.sleep(gap)
    t = time.monotonic()
    c.request("GET", "/100k")
    r = c.getresponse()
    body = r.read()
    assert r.status == 200 and len(body) == 102400, (r.status, len(body))
    out.append(time.monotonic() - t)
print(" ".join(f"{x:.4f}" for x in out))
"""


def test_keepalive_connection_stays_young_between_requests(st_tb10):
    """A keep-alive HTTP/1.1 connection that idles between requests stays young until it
    has sent its budget (docs/cbq.md: idle periods do not age a flow): beside 4 bulk
    downloads its second 100 KB reply, 1.5 s after the first, takes within 1.3x the same
    request on an idle link. Had the idle gap aged it, or had the first reply spent its
    youth, the second would get one share in five after its first quantum (~2.5x)."""
    import threading
    from test_short_transfers import HTTP_PORT
    from weirtb.traffic import PYTHON
    port = HTTP_PORT + 1
    restart(st_tb10, "pfq")
    www = st_tb10.cfg_dir / "www"
    srv = st_tb10.popen("w1", [PYTHON, "-m", "http.server", str(port), "-p", "HTTP/1.1",
                               "--directory", str(www)])
    time.sleep(0.5)

    def requests():
        out = st_tb10.run("l1", [PYTHON, "-c", KEEPALIVE, st_tb10.addr("w1"), str(port), "3",
                                 "1.5"], timeout=60)
        return [float(x) for x in out.stdout.split()]

    def run():
        idle = requests()
        res = {}
        bulk = threading.Thread(target=lambda: res.update(flows=traffic.iperf_flows(
            st_tb10, n=4, duration=8, reverse=True, cc="cubic", pairs=[("l2", "w1")] * 4,
            base_port=5301)), daemon=True)
        bulk.start()
        time.sleep(2)
        loaded = requests()
        bulk.join()
        assert all(f.error is None for f in res["flows"]), res["flows"]
        assert sum(f.goodput_bps for f in res["flows"]) >= 0.7 * PAYLOAD_MAX
        return idle, loaded

    try:
        idle, loaded = measure_twice(run, lambda r: r[1][1] <= 1.3 * r[0][1])
    finally:
        srv.kill()
        srv.communicate()
    print(f"keep-alive 100 KB requests 1.5 s apart, idle {[round(x * 1000) for x in idle]} ms, "
          f"beside 4 bulk downloads {[round(x * 1000) for x in loaded]} ms (the third is past "
          f"the 256 KiB budget)")
    assert loaded[1] <= 1.3 * idle[1], (idle, loaded)


def test_codel_keeps_8_pfq_flows_near_a_short_path(st_tb10):
    """Issue 23 item 4's own cell: 8 cubic bulk flows in pfq at 20 Mbit/s on a 10 ms
    path. Their senders' smoothed RTT stays within 2x the path's, goodput within 2 % of
    the same without an AQM. With the tree's 100 ms interval on every path under it, a
    flow's queue stood above the target for ten round trips before each drop: 24-25 ms
    (2.3-2.4x); a flow in its sawtooth now uses its own round trip (lib/sched/codel.h)."""
    restart(st_tb10, "pfq")
    ping = st_tb10.ping("l2", "w1", count=5)
    assert ping.ok, ping.output
    # The fastest idle echo through weir (10.4-10.5 ms): the first pays for ARP.
    path = float(re.search(r"= ([\d.]+)/", ping.output).group(1))
    rtt, bps = measure_twice(lambda: pfq_uploads_rtt(st_tb10, 8, "codel", path),
                             lambda r: r[0] <= 2 * path)
    _, bps_none = pfq_uploads_rtt(st_tb10, 8, "none", path)
    assert rtt <= 2 * path, (rtt, path)
    assert bps >= 0.98 * bps_none, (bps, bps_none)

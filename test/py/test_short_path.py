"""Short transfers beside bulk flows on a short path (issue 23 item 3), with real TCP.

At 10 ms a 100 KB reply is bound by the rate it gets, not by its round trips, so this is
where the new-flows list's bound and any ACK holding of a young flow show. Its own
module: a second testbed beside test_short_transfers.py's would share its DPDK prefix.
"""
import pytest

from conftest import measure_twice
from test_short_transfers import http_testbed, short_beside_bulk


@pytest.fixture(scope="module")
def st_tb10(tmp_path_factory):
    with http_testbed(tmp_path_factory.mktemp("short10"), 10) as tb:
        yield tb


@pytest.mark.parametrize("mode", ["pfq", "postack", "postack-paced", "tcr"])
def test_short_download_beside_bulk_short_path(st_tb10, mode):
    """At 10 ms a 100 KB reply is bound by its rate, not its round trips: beside 4 bulk
    downloads it took 1.32x its idle time (90 against 68 ms) while the new-flows list
    could take only half of the leaf, and postack 1.8x (122 ms) while it held a young
    flow's ACKs to its 1/5 share's BDP. With new_quanta = 3 (3/4 of the leaf) and young
    flows' ACKs let go: 79-80 ms, 1.17x (issue 23 item 3's goal: 1.2x)."""
    idle, loaded = measure_twice(lambda: short_beside_bulk(st_tb10, mode),
                                 lambda r: r[1] <= 1.25 * r[0])
    assert loaded <= 1.25 * idle, (idle, loaded)

"""Lone bulk flows fill their class on long paths (issue 23 item 5, the cells still missed).

One 20 Mbit/s class each way; WAN host w1 sits on a 150 ms path. A lone cubic download
through pfq carried 0.75-0.90 of what the class can carry in steady state: its slow start
ended in ~170 drops at `flow_limit` (128, half that path's BDP), then CoDel dropped again
and again while the overshoot drained, each drop in a new window, and cubic took ~8 s to
grow back from 0.6 of the pipe. Per-flow limits now follow the flow's round trip (lib/sched/drr.h),
CoDel's target is at least a quarter of it and a known flow is not dropped from again before
it can have answered (lib/sched/codel.h).
"""
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import traffic  # noqa: E402
from conftest import measure_twice, weir_testbed  # noqa: E402

RATE = "20mbit"
# TCP payload a 20 Mbit/s class carries: 1448 of every 1514 + 24 bytes weir charges.
PAYLOAD_MAX = 20e6 * 1448 / (1514 + 24)


def config(path, mode):
    path.write_text(weirtb.testbed_config_text(
        f'shaping = {{ mode = "{mode}"; outbound = "{RATE}"; inbound = "{RATE}"; '
        f'aqm = "codel"; }};\n', stats_interval=0.2))
    return path


@pytest.fixture(scope="module")
def far_tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("far")
    with weir_testbed(config(d / "pfq.cfg", "pfq"), lan=1, wan=1,
                      paths=[weirtb.PathSpec(delay=75)]) as tb:
        tb.cfg_dir = d
        yield tb


def restart(tb, mode):
    if tb.gateway_running:
        rc = tb.stop_gateway()
        assert rc in (None, 0), f"weir exited {rc}"
    os.environ["WEIR_TESTBED_CFG"] = str(config(tb.cfg_dir / f"{mode}.cfg", mode))
    tb.start_gateway("weir")


def test_pfq_lone_download_fills_class_at_150ms(far_tb):
    """A lone cubic download on a 150 ms path, pfq with CoDel: >= 0.93 of the payload the
    class carries from its 5th second on (0.75-0.90 before; 0.99 after, sender RTT ~180 ms),
    with no drop at the per-flow limit."""
    restart(far_tb, "pfq")

    def run():
        flows = traffic.iperf_flows(far_tb, n=1, duration=12, reverse=True, cc="cubic",
                                    pairs=[("l1", "w1")])
        assert flows[0].error is None, flows[0].error
        return traffic.steady_bps(flows[0].interval_bps, 4), flows[0]

    bps, flow = measure_twice(run, lambda r: r[0] >= 0.93 * PAYLOAD_MAX)
    cls = far_tb.weir_stats()["shaping"]["inbound"]["classes"]
    cls = cls.values() if isinstance(cls, dict) else cls
    drops_flow = sum(c.get("drops_flow", 0) for c in cls)
    print(f"pfq lone download at 150 ms: {bps / 1e6:.2f} Mbit/s = {bps / PAYLOAD_MAX:.3f} of "
          f"the class's payload; per s {[round(x / 1e6, 1) for x in flow.interval_bps]}; "
          f"sender srtt {flow.mean_rtt_ms} ms; drops_flow {drops_flow}")
    assert bps >= 0.93 * PAYLOAD_MAX, bps / PAYLOAD_MAX
    # Its queue may hold its BDP and more: its slow start ends without tail drops.
    assert drops_flow == 0, drops_flow

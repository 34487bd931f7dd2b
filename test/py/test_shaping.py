"""Link shaping in the testbed: weir holds each direction to its configured link rate with
real Linux TCP, and shares it fairly among flows (per-flow DRR queues in one default class,
before the classifier exists). Loose bounds: these run on a busy 2-core machine."""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from conftest import measure_twice, weir_testbed  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.traffic import jain, steady_bps  # noqa: E402

RATE_MBIT = 20
# Goodput a TCP flow can get from a shaped link: 1448 payload bytes (with timestamps) per
# 1514-byte frame plus the 24 bytes of Ethernet overhead weir accounts for by default.
GOODPUT_SHARE = 1448 / (1514 + 24)


@pytest.fixture(scope="module")
def shaped(tmp_path_factory):
    cfg = tmp_path_factory.mktemp("shaping") / "weir.cfg"
    cfg.write_text(weirtb.testbed_config_text(
        f'shaping = {{ outbound = "{RATE_MBIT}mbit"; inbound = "{RATE_MBIT}mbit"; }};\n'))
    # Equal 10 ms paths: this checks the shaper, not TCP's RTT unfairness.
    with weir_testbed(cfg, lan=2, wan=2, paths=[PathSpec(delay=5), PathSpec(delay=5)]) as tb:
        yield tb


@pytest.mark.parametrize("reverse", [False, True], ids=["outbound", "inbound"])
def test_link_rate_and_per_flow_fairness(shaped, reverse):
    expect = RATE_MBIT * GOODPUT_SHARE

    def run():
        flows = shaped.iperf(n=4, duration=12, reverse=reverse)
        assert all(f.error is None for f in flows), [f.error for f in flows]
        # Steady state: leave out the first 4 s of slow start and queue build-up.
        return [steady_bps(f.interval_bps, 4) for f in flows]

    steady = measure_twice(run, lambda st: 0.95 * expect <= sum(st) / 1e6 <= 1.01 * expect)
    total_mbit = sum(steady) / 1e6
    print(f"{'inbound' if reverse else 'outbound'}: total {total_mbit:.2f} Mbit/s (expect {expect:.2f}), "
          f"Jain {jain(steady):.4f}, flows {[round(x / 1e6, 2) for x in steady]}, "
          f"queued {shaped.weir_stats()['shaping']}")
    assert 0.95 * expect <= total_mbit <= 1.01 * expect, (total_mbit, steady)
    assert jain(steady) >= 0.98, steady

    stats = shaped.weir_stats()
    sh = stats["shaping"]["inbound" if reverse else "outbound"]
    assert sh["rate_bps"] == RATE_MBIT * 1_000_000
    assert sh["pkts"] > 0
    assert stats["ports"]["lan"]["tx_full"] == 0 and stats["ports"]["wan"]["tx_full"] == 0

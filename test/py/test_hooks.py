"""The Lua policy's hooks on a running weir (issue #5): on_flow moves one flow to a
penalty class (a decision no table rule makes here), a timer and an on_stats quota
change classes through weir.set_class (the policy is recompiled and switched), and a
failing on_flow_end is counted and reported with its line while traffic goes on.
"""
import re
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "test" / "py"))

import weirtb  # noqa: E402
from conftest import weir_testbed  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.traffic import steady_bps  # noqa: E402
from test_classes import BULK_PORT, write_config  # noqa: E402

SCRIPT = """-- test_hooks.py's policy
for _, dir in ipairs({ "outbound", "inbound" }) do
  weir.link{ dir = dir, rate = "30mbit", default = "bulk" }
  weir.class{ dir = dir, name = "gold", rate = "20mbit", ceil = "30mbit", prio = 0 }
  weir.class{ dir = dir, name = "bulk", rate = "9mbit", ceil = "30mbit", prio = 1 }
  weir.class{ dir = dir, name = "penalty", rate = "1mbit", ceil = "2mbit", prio = 2 }
end
weir.rule{ class = "gold", proto = "tcp", wan_port = "5201-5204" }
weir.rule{ class = "bulk", proto = "tcp", wan_port = "5301-5304" }

weir.on_flow(function(f)
  if f.proto == "tcp" and f.wan_port == 5304 and f.class.outbound == "bulk" then
    return "penalty"
  end
end)

local ticks = 0
weir.every(1, function(now)
  ticks = ticks + 1
  if ticks == 2 then weir.set_class{ dir = "inbound", name = "gold", ceil = "25mbit" } end
end)

local capped = false
weir.on_stats(function(s)
  for addr, h in pairs(s.hosts) do
    if h.bytes_out > 4000000 and not capped then
      capped = true
      weir.set_class{ dir = "outbound", name = "gold", ceil = "21mbit" }
    end
  end
end)

weir.on_flow_end(function(f)
  error("boom")
end)
"""


@pytest.fixture(scope="module")
def hooks_tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("hooks")
    (d / "policy.lua").write_text(SCRIPT)
    cfg = write_config(d / "hooks.cfg")
    # Short TCP close timeouts: ended flows leave the table (on_flow_end) soon.
    text = cfg.read_text().replace("tcp_closing = 30;", "tcp_closing = 2;").replace(
        "tcp_closed = 5;", "tcp_closed = 1;")
    cfg.write_text(text + '\npolicy = { script = "policy.lua"; };\n')
    with weir_testbed(cfg, lan=2, wan=2, paths=[PathSpec(delay=5), PathSpec(delay=5)]) as tb:
        yield tb


def test_hooks_move_flows_and_change_classes(hooks_tb):
    tb = hooks_tb
    flows = tb.iperf(n=4, duration=10, base_port=BULK_PORT)
    assert all(f.error is None for f in flows), [f.error for f in flows]
    steady = [steady_bps(f.interval_bps, 3, 9) for f in flows]
    time.sleep(3)    # the flows expire (tcp_closed = 1 s): on_flow_end runs and fails
    st = tb.weir_stats()
    h = st["hooks"]
    out = st["shaping"]["outbound"]["classes"]
    print(f"per flow {[round(x / 1e6, 2) for x in steady]} Mbit/s; hooks {h}; policy "
          f"{st['policy']}; gold ceil out {out['gold']['ceil_bps']} in "
          f"{st['shaping']['inbound']['classes']['gold']['ceil_bps']}")
    # on_flow: the flow to 5304 (the fourth) went to penalty (ceil 2 Mbit/s).
    assert h["moves"] >= 1 and h["moves_applied"] >= 1, h
    assert steady[3] <= 2.1e6, steady
    assert min(steady[:3]) >= 5e6, steady
    # The timer's and the quota's set_class: recompiled and switched.
    assert st["shaping"]["inbound"]["classes"]["gold"]["ceil_bps"] == 25_000_000
    assert out["gold"]["ceil_bps"] == 21_000_000
    assert st["policy"]["epoch"] >= 3, st["policy"]
    # on_flow_end fails every time: counted, reported with its line; nothing else stops.
    assert h["hooks"]["on_flow_end"]["errors"] >= 4, h
    line = next(i + 1 for i, l in enumerate(SCRIPT.splitlines()) if 'error("boom")' in l)
    assert re.search(rf"policy\.lua:{line}: boom", h["last_error"]), h
    assert h["hooks"]["on_flow"]["errors"] == 0 and h["hooks"]["timer"]["calls"] >= 2, h
    assert tb.stop_gateway() == 0

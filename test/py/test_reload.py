"""Policy reload on a running weir under saturating TCP (issue #5).

weir runs the two-class testbed policy (gold 20, bulk 10 Mbit/s, both may borrow
up to the 30 Mbit/s link). Four TCP flows fill bulk, which borrows the idle link.
The configuration is rewritten to cap bulk at 10 Mbit/s and weir gets SIGHUP: the
class must be at its new ceiling within a second, with nothing dropped by the
switch. Then a broken file: weir reports FILE:LINE and keeps the policy in force.
"""
import os
import re
import signal
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
from test_classes import BULK_PORT, LINK, Sampler, start_flows, write_config  # noqa: E402


@pytest.fixture(scope="module")
def reload_tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("reload")
    cfg = write_config(d / "reload.cfg", body_file="testbed-twoclass.cfg")
    with weir_testbed(cfg, lan=2, wan=2, paths=[PathSpec(delay=5), PathSpec(delay=5)]) as tb:
        tb.cfg = cfg
        yield tb


def wait_epoch(tb, epoch, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        st = tb.weir_stats()
        if st["policy"]["epoch"] == epoch:
            return st
        time.sleep(0.1)
    raise AssertionError(f"policy {epoch} not in force: {tb.weir_stats()['policy']}")


def port_drops(st):
    return sum(p["dropped"] for p in st["ports"].values())


def test_reload_under_traffic_caps_the_class(reload_tb):
    tb = reload_tb
    text = tb.cfg.read_text()
    capped = text.replace('{ name = "bulk"; rate = "10mbit"; ceil = "30mbit"; prio = 1; }',
                          '{ name = "bulk"; rate = "10mbit"; ceil = "10mbit"; prio = 1; }')
    assert capped != text
    with Sampler(tb, "outbound") as s:
        t0 = s.now()
        threads, res = start_flows(tb, {"bulk": dict(n=4, duration=12, base_port=BULK_PORT)})
        s.wait_until(t0 + 6)
        before = s.rate("bulk", t0 + 3, t0 + 6)
        drops_before = port_drops(tb.weir_stats())
        tb.cfg.write_text(capped)
        tb.signal_gateway(signal.SIGHUP)
        st = wait_epoch(tb, 2)
        t_switch = st["uptime_s"]
        # Class counters start over with the new trees: measure within them.
        s.wait_until(t_switch + 3)
        after = s.rate("bulk", t_switch + 1, t_switch + 3)
        drops_switch = port_drops(tb.weir_stats()) - drops_before
        for t in threads:
            t.join()
    flows = res["bulk"]
    assert all(f.error is None for f in flows), [f.error for f in flows]
    retx = sum(f.retransmits or 0 for f in flows)
    print(f"bulk before {before / 1e6:.2f} Mbit/s (borrowing), after the reload "
          f"{after / 1e6:.2f} (ceil 10); dropped by weir across the switch {drops_switch}; "
          f"TCP retransmissions {retx}; policy {st['policy']}")
    assert before >= 0.9 * LINK, before     # borrowing the idle link (noisy host: 0.9)
    assert abs(after / 10e6 - 1) <= 0.05, after
    assert st["policy"]["reloads"] == 1 and st["policy"]["reload_failures"] == 0
    assert drops_switch == 0, drops_switch


def test_broken_reload_keeps_the_policy(reload_tb):
    tb = reload_tb
    good = tb.cfg.read_text()
    broken = good.replace('rate = "30mbit";', 'rate = "30 furlongs";', 1)
    assert broken != good
    epoch = tb.weir_stats()["policy"]["epoch"]
    try:
        tb.cfg.write_text(broken)
        tb.signal_gateway(signal.SIGHUP)
        end = time.time() + 5
        while time.time() < end and tb.weir_stats()["policy"]["reload_failures"] == 0:
            time.sleep(0.1)
        pol = tb.weir_stats()["policy"]
        print(pol)
        assert pol["reload_failures"] == 1 and pol["epoch"] == epoch, pol
        line = next(i + 1 for i, l in enumerate(broken.splitlines()) if "furlongs" in l)
        assert re.search(rf"{re.escape(str(tb.cfg))}:{line}:", pol["reload_error"]), pol
        # Still forwarding under the old policy.
        flows = tb.iperf(n=1, duration=3, base_port=BULK_PORT)
        assert flows[0].error is None and sum(flows[0].interval_bps) > 0
    finally:
        tb.cfg.write_text(good)
    tb.signal_gateway(signal.SIGHUP)
    assert wait_epoch(tb, epoch + 1)["policy"]["reload_error"] == ""
    assert tb.stop_gateway() == 0    # exits cleanly, every mbuf back in the pool


TWOCLASS_LUA = """-- the two-class testbed policy (conf/testbed-twoclass.cfg), in Lua
for _, dir in ipairs({ "outbound", "inbound" }) do
  weir.link{ dir = dir, rate = "30mbit", default = "bulk" }
  weir.class{ dir = dir, name = "gold", rate = "20mbit", ceil = "30mbit", prio = 0 }
  weir.class{ dir = dir, name = "bulk", rate = "10mbit", ceil = BULK_CEIL, prio = 1 }
end
weir.rule{ class = "gold", proto = "tcp", wan_port = "5201-5204" }
weir.rule{ class = "bulk", proto = "tcp", wan_port = "5301-5304" }
"""


def test_lua_policy_reload(reload_tb):
    """weir runs a Lua policy; SIGHUP re-runs the script. A syntax error and a
    script that never ends are reported (script:LINE) and change nothing."""
    tb = reload_tb
    d = tb.cfg.parent
    script = d / "policy.lua"
    script.write_text(TWOCLASS_LUA.replace("BULK_CEIL", '"30mbit"'))
    base = write_config(d / "lua.cfg").read_text()
    cfg = d / "lua.cfg"
    cfg.write_text(base + '\npolicy = { script = "policy.lua"; instructions = 1000000; };\n')
    os.environ["WEIR_TESTBED_CFG"] = str(cfg)
    tb.start_gateway("weir")
    try:
        st = tb.weir_stats()
        assert set(st["shaping"]["outbound"]["classes"]) == {"gold", "bulk"}
        assert st["shaping"]["outbound"]["classes"]["bulk"]["ceil_bps"] == 30_000_000
        epoch = st["policy"]["epoch"]
        cases = [("weir.class{ dir = 'outbound', name = 'x' rate = 1 }\n", r"policy\.lua:9:"),
                 ("while true do end\n", r"policy\.lua:9: .*instruction budget")]
        for n, (tail, want) in enumerate(cases, 1):
            script.write_text(TWOCLASS_LUA.replace("BULK_CEIL", '"30mbit"') + tail)
            tb.signal_gateway(signal.SIGHUP)
            end = time.time() + 5
            while time.time() < end and tb.weir_stats()["policy"]["reload_failures"] < n:
                time.sleep(0.1)
            pol = tb.weir_stats()["policy"]
            print(pol)
            assert pol["reload_failures"] == n and pol["epoch"] == epoch, pol
            assert re.search(want, pol["reload_error"]), pol
        script.write_text(TWOCLASS_LUA.replace("BULK_CEIL", '"10mbit"'))
        tb.signal_gateway(signal.SIGHUP)
        st = wait_epoch(tb, epoch + 1)
        assert st["shaping"]["outbound"]["classes"]["bulk"]["ceil_bps"] == 10_000_000, st
        assert st["policy"]["reload_error"] == ""
    finally:
        os.environ["WEIR_TESTBED_CFG"] = str(tb.cfg)
    assert tb.stop_gateway() == 0

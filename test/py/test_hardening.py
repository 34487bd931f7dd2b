"""Issue 16/17 hardening against the real binary: scripts that used to freeze the management
lcore, connection floods against the API, hostile paths and bodies, lenient values, include
and token-file mistakes, the policy upload on a full disk and cross-site requests."""
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from test_rest import REPO, WEIR, Weir, assert_error, put_script, script_weir

pytestmark = [pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}"),
              pytest.mark.skipif(os.geteuid() != 0, reason="weir on net_pcap ports is run as root")]

CHECK_CFG = """\
eal = ["--no-huge", "-m", "128", "--no-pci", "--file-prefix=whard-{tag}"];
log_level = "error";
lcores = {{ management = 0; workers = [1]; }};
ports = {{
  lan = {{ device = "net_null0"; }};
  wan = {{ device = "net_null1"; }};
}};
mempool = {{ mbufs = 8191; cache = 128; }};
"""

LINK = ('weir.link{ dir = "outbound", rate = "30mbit", default = "bulk" }\n'
        'weir.class{ dir = "outbound", name = "bulk", rate = "10mbit" }\n'
        'weir.link{ dir = "inbound", rate = "30mbit" }\n')
BACKTRACK = 'local s = string.rep("a", 30000); string.find(s, string.rep("a-", 12) .. "b")\n'


def check(tmp_path, text, timeout=30):
    cfg = tmp_path / "weir.cfg"
    cfg.write_text(text)
    t0 = time.monotonic()
    p = subprocess.run([str(WEIR), "--", "--config", str(cfg), "--check"], capture_output=True,
                       text=True, timeout=timeout)
    return cfg, p, time.monotonic() - t0


# ---- 16.1: C functions a script calls are bounded ----

@pytest.mark.parametrize("body,line,needle", [
    (BACKTRACK, 4, "string.find: pattern too costly"),
    ('local s = ("x"):rep(3000)\nwhile true do s:find("x-y") end\n', 5, "time limit exceeded"),
    ('local s = string.rep("", 1e15)\n', 4, "string.rep: not enough memory"),
])
def test_check_bounds_c_functions(tmp_path, body, line, needle):
    script = tmp_path / "p.lua"
    script.write_text(LINK + body)
    _, p, took = check(tmp_path, CHECK_CFG.format(tag="lua") +
                       f'policy = {{ script = "{script}"; instructions = 10000000000; }};\n')
    assert p.returncode != 0 and took < 10, (took, p.stderr)
    assert p.stderr.startswith(f"{script}:{line}: ") and needle in p.stderr, p.stderr


def test_upload_of_a_runaway_script(tmp_path):
    w, script = script_weir(tmp_path, "runaway")
    try:
        before = script.read_text()
        t0 = time.monotonic()
        e = assert_error(*put_script(w, LINK + BACKTRACK), 422)
        assert time.monotonic() - t0 < 5
        assert e["message"].startswith(f"{script}:4: ") and "pattern too costly" in e["message"]
        assert script.read_text() == before
        assert w.get("/api/v1/status")[0] == 200
    finally:
        w.stop()


def test_sigterm_stops_a_busy_hook(tmp_path):
    """A timer that keeps the management lcore busy in allowed calls: SIGTERM still ends
    weir within a second."""
    w, script = script_weir(tmp_path, "busy")
    try:
        busy = LINK + ('weir.every(1, function()\n'
                       '  local s = ("x"):rep(3000)\n'
                       '  while true do s:find("x-y") end\n'
                       'end)\n')
        assert put_script(w, busy)[0] == 200
        time.sleep(1.5)                 # the timer is running now (2 s limit)
        t0 = time.monotonic()
        w.p.send_signal(signal.SIGTERM)
        out, err = w.p.communicate(timeout=30)
        took = time.monotonic() - t0
        assert w.p.returncode == 0, err
        assert took < 1.0, took
    finally:
        if w.p.poll() is None:
            w.stop()

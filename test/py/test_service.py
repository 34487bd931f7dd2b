"""weir as a service (issue 18.4), tested without systemd as PID 1 (it is not, here):

- the sd_notify protocol: weir run with NOTIFY_SOCKET and WATCHDOG_USEC pointing at this
  test's own socket sends READY=1 once its ports and workers run, WATCHDOG=1 at half the
  watchdog period from its management loop, and STOPPING=1 on SIGTERM;
- fail-open: the unit's hooks (dist/weir-failopen) run directly around a weir restart in
  the testbed, in the unit's order (`open`, weir stops, `open` again, weir starts, READY,
  `close`), with a
  numbered 1000-frame/s UDP stream measuring the outage, beside the same restart without
  the hooks."""
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
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from conftest import weir_testbed  # noqa: E402
from weirtb import PathSpec, weir_config_text  # noqa: E402
from weirtb.traffic import PYTHON  # noqa: E402

HOOK = REPO / "dist" / "weir-failopen"
STREAM = REPO / "scripts" / "weirtb" / "seqstream.py"


def notify_socket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(path))
    s.settimeout(0.1)
    return s


def messages(sock, until, stop=None):
    """(monotonic time, message) received before `until`, or until one contains `stop`."""
    got = []
    while time.monotonic() < until:
        try:
            m = sock.recv(4096).decode()
        except socket.timeout:
            continue
        got.append((time.monotonic(), m))
        if stop and stop in m:
            break
    return got


def test_sd_notify(tmp_path):
    if not weirtb.weir_binary().exists():
        pytest.skip("weir not built")
    sock = notify_socket(tmp_path / "notify")
    cfg = tmp_path / "weir.cfg"
    cfg.write_text(weir_config_text("net_null0", "net_null1", prefix=f"wsvc-{os.getpid()}",
                                    mem_mb=256, body="management = { port = 0; };\n"))
    env = dict(os.environ, NOTIFY_SOCKET=str(tmp_path / "notify"), WATCHDOG_USEC="200000")
    p = subprocess.Popen([str(weirtb.weir_binary()), "--", "--config", str(cfg)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ready = messages(sock, time.monotonic() + 20, stop="READY=1")
        assert ready and "READY=1" in ready[-1][1], (ready, p.poll())
        assert "STATUS=bridging net_null0 and net_null1 with 1 worker(s)" in ready[-1][1], ready
        # READY comes once the ports are started: weir has said so on stdout by then.
        t_ready = ready[-1][0]
        got = messages(sock, t_ready + 1.5)
        wd = [t for t, m in got if m == "WATCHDOG=1"]
        # Every 100 ms (half of 200 ms): ~15 in 1.5 s; a loaded VM may delay a few.
        assert len(wd) >= 8, got
        assert max(b - a for a, b in zip(wd, wd[1:])) < 0.2 * 2, wd
        p.send_signal(signal.SIGTERM)
        stopping = messages(sock, time.monotonic() + 10, stop="STOPPING=1")
        assert stopping and stopping[-1][1] == "STOPPING=1", stopping
        out, _ = p.communicate(timeout=20)
        assert p.returncode == 0, out[-2000:]
        print(f"sd_notify: READY, {len(wd)} WATCHDOG in 1.5 s (asked: every 0.1 s), STOPPING")
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        sock.close()


@pytest.fixture(scope="module")
def stb(tmp_path_factory):
    d = tmp_path_factory.mktemp("service")
    cfg = d / "weir.cfg"
    cfg.write_text(weirtb.testbed_config_text())
    with weir_testbed(cfg, lan=1, wan=1, paths=[PathSpec(delay=2)]) as tb:
        tb.cfg = cfg
        tb.dir = d
        yield tb


def hook(tb, action):
    r = tb.run("gw", [str(HOOK), action, str(tb.cfg)], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip()


def restart_outage(tb, failopen, port):
    """Restart weir under a 1000 frames/s stream l1 -> w1; the receiver's tally."""
    rx = tb.popen("w1", [PYTHON, str(STREAM), "recv", "--port", str(port), "--seconds", "9"])
    assert rx.stdout.readline().strip() == "READY", rx.stderr.read()
    tx = tb.popen("l1", [PYTHON, str(STREAM), "send", "--host", tb.addr("w1"), "--port", str(port),
                         "--pps", "1000", "--seconds", "7"])
    sock_path = tb.dir / f"notify-{port}"
    sock = notify_socket(sock_path)
    try:
        time.sleep(1.5)
        t0 = time.monotonic()
        if failopen:
            hook(tb, "open")            # ExecStop: before weir gets SIGTERM
        rc = tb.stop_gateway()          # KillSignal=SIGTERM, until weir exits
        assert rc == 0, tb.log_tail("weir")
        if failopen:
            hook(tb, "open")            # ExecStopPost: after any stop, a crash too
        os.environ["NOTIFY_SOCKET"] = str(sock_path)
        try:
            tb.start_gateway("weir", wait=False)
        finally:
            del os.environ["NOTIFY_SOCKET"]
        ready = messages(sock, time.monotonic() + 20, stop="READY=1")
        assert ready and "READY=1" in ready[-1][1], ready
        if failopen:
            hook(tb, "close")           # ExecStartPost: after READY
        restart_s = time.monotonic() - t0
        tx.communicate(timeout=20)
        out, err = rx.communicate(timeout=20)
        res = json.loads(out)
        res["restart_s"] = round(restart_s, 2)
        return res
    finally:
        sock.close()
        for p in (tx, rx):
            if p.poll() is None:
                p.kill()
                p.communicate()


def test_failopen_restart(stb):
    assert "nothing to do" not in hook(stb, "status")     # it found gw-lan and gw-wan
    plain = restart_outage(stb, False, 5801)
    fo = restart_outage(stb, True, 5802)
    print(f"restart without fail-open: {plain}\nrestart with fail-open:    {fo}")
    assert hook(stb, "status").startswith("closed")      # weir alone forwards again
    assert plain["lost"] > 100, plain                    # a restart is an outage at all
    # The kernel bridge carries the stream while weir is down: far fewer frames lost.
    assert fo["lost"] < plain["lost"] / 4, (plain, fo)
    assert stb.ping("l1", "w1", count=2).ok

"""pep (premature ACKs, issue 20) with real Linux TCP: nothing lost or
reordered from the application's view, whatever happens beyond the gateway.

weir runs the pep mode on a 20 Mbit/s link. l1 uploads to WAN hosts 50 ms
away (one way) whose paths drop 1 % (w1) or 5 % (w2) of the data frames on
their way to the receiver, so the gateway must recover what it p-acked from
its copies. A bulk transfer checks both ends' sha256; a receiver that stops
reading for a while must not make pep give up; a receiver host that vanishes
must end the sender's connection with a RST (the rule in docs/pep.md), not
leave it believing data was delivered; a reload that takes the mode away
under traffic lets the flow finish intact. weir exits 0 (every copy back in
the pool) when the module's testbed goes down.
"""
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "test" / "py"))

from conftest import weir_testbed  # noqa: E402
from test_classes import write_config  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.netns import CommandError  # noqa: E402
from weirtb.traffic import PYTHON  # noqa: E402

# The satellite case's transfers: 1 MB each in CI (about 20 losses each); the 20 MB by hand
# (WEIR_PEP_SAT_BYTES=20000000, docs/results/pep/README.md).
SAT_BYTES = int(os.environ.get("WEIR_PEP_SAT_BYTES", 1_000_000))

SHAPING = 'shaping = { outbound = "20mbit"; inbound = "20mbit"; mode = "%s"; };\n'


@pytest.fixture(scope="module")
def pep_tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("pep")
    cfg = write_config(d / "pep.cfg", body=SHAPING % "pep")
    paths = [PathSpec(delay=50, loss=1, loss_dir="to_path"),
             PathSpec(delay=50, loss=5, loss_dir="to_path"),
             PathSpec(delay=25),
             PathSpec(delay=300, loss=3, loss_dir="to_path")]
    with weir_testbed(cfg, lan=1, wan=4, paths=paths) as tb:
        tb.cfg = cfg
        yield tb


def pep_stats(tb):
    st = tb.weir_stats()["pep"]
    assert st is not None, "weir reports no pep state"
    return st


def wait_for(cond, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("dst,loss,nbytes", [("w1", 1, 1_000_000), ("w2", 5, 600_000)])
def test_bulk_under_far_loss(pep_tb, dst, loss, nbytes):
    """The data arrives whole and in order though the far side drops it, and
    the gateway did the work: it p-acked, dropped R's ACKs for what it had
    acknowledged, and retransmitted from its copies."""
    tb = pep_tb
    before = pep_stats(tb)
    res = tb.bulk("l1", dst, nbytes=nbytes, port=5310 + loss, timeout=60)
    assert res.ok, f"{loss} % far loss: {res}"
    after = wait_for(lambda: (s := pep_stats(tb)) and s["copies"] == 0 and s, 5,
                     "every copy to be freed")
    d = {k: after[k] - before[k] for k in ("packed", "real_dropped", "fast_retx", "rto_retx",
                                           "give_ups", "copied")}
    print(f"{loss} % loss, {nbytes} B in {res.seconds:.1f} s: {d}")
    # p-acked: some of the segments, not all (past the watermark a segment waits unacked,
    # with the buffer full it passes as is). A loaded CI machine read 83 of 414 at 5 %.
    assert d["packed"] > nbytes // 1448 // 10, d
    assert d["real_dropped"] > 0, d
    assert d["fast_retx"] + d["rto_retx"] > 0, d
    assert d["give_ups"] == 0, d


def test_long_lossy_path_five_in_a_row(pep_tb):
    """Issue 36: a 600 ms round trip with 3 % of the data lost beyond the
    gateway (the seed's satellite case): 20 MB arrive whole (both ends'
    sha256), five transfers in a row, none reset or given up; the gateway
    recovered the losses from its copies."""
    tb = pep_tb
    before = pep_stats(tb)
    for i in range(5):
        res = tb.bulk("l1", "w4", nbytes=SAT_BYTES, port=5350 + i,
                      timeout=max(120, SAT_BYTES // 50_000))
        print(f"run {i}: {SAT_BYTES} B in {res.seconds:.1f} s, "
              f"{SAT_BYTES * 8 / res.seconds / 1e6:.2f} Mbit/s, intact {res.ok}")
        assert res.ok, f"run {i}: {res}"
    after = wait_for(lambda: (s := pep_stats(tb)) and s["copies"] == 0 and s, 10,
                     "every copy to be freed")
    d = {k: after[k] - before[k] for k in ("packed", "fast_retx", "rto_retx", "retx_again",
                                           "give_ups", "lost_resent", "rst_ignored")}
    print(d)
    assert d["give_ups"] == 0, d
    assert d["packed"] > 0 and d["fast_retx"] + d["rto_retx"] > 0, d


def test_restart_mid_transfer(pep_tb):
    """Issue 36.4: weir stopped (SIGTERM) while S was told of data R still
    lacks on the 600 ms lossy path: the stopping worker delivers it or resets
    both ends, so the transfer either ends intact through the restarted weir
    or the sender's application sees the reset; it never hangs with the
    sender believing data delivered that the receiver will never get."""
    tb = pep_tb
    out = {}

    def run():
        try:
            out["res"] = tb.bulk("l1", "w4", nbytes=4_000_000, port=5360, timeout=90)
        except CommandError as e:
            out["err"] = str(e)

    t = threading.Thread(target=run)
    t.start()
    try:
        wait_for(lambda: (s := pep_stats(tb))["copies"] > 20 and s["active"] > 0, 30,
                 "pep to hold p-acked copies")
        rc = tb.stop_gateway(timeout=15)
        final = json.loads(tb.weir_stats_path.read_text())["pep"]
        tb.start_gateway("weir")
    finally:
        t.join(120)
    print(out, {k: final[k] for k in ("drain_resets", "flushed_owed", "give_ups", "copies")})
    assert rc == 0, "weir exits 0: every copy back in the pool"
    assert final["flushed_owed"] == 0, final
    assert not t.is_alive(), "the transfer hung"
    if "res" in out:
        assert out["res"].ok, out["res"]
    else:
        assert "ConnectionResetError" in out["err"], out["err"]
        assert final["drain_resets"] > 0, final


def test_receiver_stops_reading(pep_tb):
    """A receiver that reads nothing for 3 s: its window closes, pep stops
    p-acking past it, nothing times out, and the transfer ends intact."""
    tb = pep_tb
    before = pep_stats(tb)
    res = tb.bulk("l1", "w3", nbytes=1_500_000, port=5320, timeout=40, pause=3)
    assert res.ok, res
    after = pep_stats(tb)
    assert after["give_ups"] == before["give_ups"]
    assert after["packed"] > before["packed"]
    wait_for(lambda: pep_stats(tb)["copies"] == 0, 5, "every copy to be freed")


SENDER = r"""
import socket, sys, time
s = socket.create_connection((sys.argv[1], 5330), timeout=20)
s.settimeout(20)
t0 = time.monotonic()
try:
    while time.monotonic() - t0 < 25:
        s.sendall(b"x" * 65536)
    print("NO ERROR")
except OSError as e:
    print(f"ERROR {type(e).__name__} {time.monotonic() - t0:.1f}")
"""


def test_receiver_vanishes(pep_tb):
    """The receiver host drops off the network mid-transfer. The sender was
    told data arrived that never will: pep retransmits from its copies, then
    gives up and resets both sides, so the sender's application sees an
    error within seconds instead of believing its data was delivered."""
    tb = pep_tb
    before = pep_stats(tb)
    rx = tb.popen("w3", [PYTHON, "-c",
                         "import socket,time\n"
                         "l=socket.socket(); l.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                         "l.bind(('0.0.0.0',5330)); l.listen(1); print('READY', flush=True)\n"
                         "c,_=l.accept()\n"
                         "t=time.monotonic()\n"
                         "while time.monotonic()-t<40:\n"
                         "    b=c.recv(65536)\n"
                         "    if not b: break\n"])
    try:
        assert rx.stdout.readline().strip() == "READY"
        tx = tb.popen("l1", [PYTHON, "-c", SENDER, tb.addr("w3")])
        time.sleep(2)
        tb.run("w3", ["ip", "link", "set", "eth0", "down"])
        out, err = tx.communicate(timeout=40)
        print(out, err[-300:], pep_stats(tb), before)
        # The sender's application always learns: reset by pep's give-up when
        # the gateway had p-acked data outstanding (the usual case), or its
        # own timeout when everything S was told of had reached R (then the
        # gateway held only copies S was never told of, and drops them).
        assert out.startswith("ERROR"), out + err
        if out.startswith("ERROR ConnectionResetError"):
            after = wait_for(lambda: (s := pep_stats(tb))["give_ups"] > before["give_ups"] and s,
                             5, "pep to count its give-up")
            assert after["rto_retx"] > before["rto_retx"]
            assert after["rst_sent"] >= before["rst_sent"] + 2
        else:
            assert pep_stats(tb)["give_ups"] == before["give_ups"]
        wait_for(lambda: pep_stats(tb)["copies"] == 0, 5, "every copy to be freed")
    finally:
        tb.run("w3", ["ip", "link", "set", "eth0", "up"], check=False)
        if rx.poll() is None:
            rx.kill()
        rx.communicate()


def test_reload_turns_pep_off_under_traffic(pep_tb):
    """SIGHUP with mode "postack" while a transfer over the lossy path runs:
    the flow's copies still recover what was p-acked, its state drains to
    nothing, and the data arrives whole."""
    tb = pep_tb
    # Flows of the tests before (the vanished receiver's gives up only after
    # its RTOs back off, up to ~12 s) must not be counted as this one's.
    wait_for(lambda: pep_stats(tb)["active"] == 0, 30, "earlier tests' pep state to drain")
    epoch = tb.weir_stats()["policy"]["epoch"]
    out = {}

    def run():
        out["res"] = tb.bulk("l1", "w1", nbytes=2_000_000, port=5340, timeout=60)

    t = threading.Thread(target=run)
    t.start()
    try:
        wait_for(lambda: pep_stats(tb)["copies"] > 0, 10, "pep to hold copies")
        tb.cfg.write_text(tb.cfg.read_text().replace('mode = "pep"', 'mode = "postack"'))
        tb.signal_gateway(signal.SIGHUP)
        wait_for(lambda: tb.weir_stats()["policy"]["epoch"] > epoch, 5, "the new policy")
    finally:
        t.join(60)
    assert out["res"].ok, out["res"]
    st = wait_for(lambda: (s := pep_stats(tb))["active"] == 0 and s, 20,
                  "pep state to drain")
    assert st["copies"] == 0

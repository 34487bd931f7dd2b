"""Ad-hoc measurement for docs/results/maxmin (not part of the suite: run it by path).
One 10 Mbit/s class each way, 40 ms path, one worker.
light: a cubic download l2<-w1 beside a 64-byte ping-pong l1<->w1 every 0.1 s;
bulk4: 4 cubic downloads l2<-w1. 3 runs each; goodput from 4 s on, class wire rate."""
import os, sys, time
from pathlib import Path
import pytest
REPO = Path(os.environ.get("WLT_REPO", Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "test/py"))
import weirtb
from weirtb import traffic
from conftest import weir_testbed
from test_classes import Sampler
from test_multiworker import PINGPONG

def cfg(path, mode):
    path.write_text(weirtb.testbed_config_text(
        f'shaping = {{ mode = "{mode}"; outbound = "10mbit"; inbound = "10mbit"; }};\n',
        stats_interval=0.2))
    return path

@pytest.fixture(scope="module")
def tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("m")
    with weir_testbed(cfg(d / "pfq.cfg", "pfq"), lan=2, wan=1, paths=[weirtb.PathSpec(delay=20)]) as tb:
        tb.cfg_dir = d
        yield tb

def restart(tb, mode):
    if tb.gateway_running:
        tb.stop_gateway()
    os.environ["WEIR_TESTBED_CFG"] = str(cfg(tb.cfg_dir / f"{mode}.cfg", mode))
    tb.start_gateway("weir")

def one(tb, scen, dur=12):
    srv = talk = None
    if scen == "light":
        srv = tb.popen("w1", [sys.executable, "-c", PINGPONG, "serve", "5341"])
        assert srv.stdout.readline().strip() == "READY"
        talk = tb.popen("l1", [sys.executable, "-c", PINGPONG, "talk", tb.addr("w1"), "5341", "0", str(dur + 2)])
        time.sleep(1)
    n = 1 if scen == "light" else 4
    with Sampler(tb, "inbound") as s:
        t0 = s.now()
        flows = traffic.iperf_flows(tb, n=n, duration=dur, reverse=True, cc="cubic",
                                    pairs=[("l2", "w1")] * n, base_port=5311)
    if talk:
        talk.communicate(timeout=30); srv.kill(); srv.communicate()
    cls = next(iter(s.samples[-1][1]))
    g = [sum(f.interval_bps[4:dur]) / (dur - 4) for f in flows]
    jain = sum(g) ** 2 / (len(g) * sum(x * x for x in g))
    return g, jain, s.rate(cls, t0 + 4, t0 + dur)

@pytest.mark.parametrize("scen", ["light", "bulk4"])
@pytest.mark.parametrize("mode", ["tcr", "ipabr", "postack", "postack-paced"])
def test_m(tb, mode, scen):
    restart(tb, mode)
    for i in range(3):
        g, jain, wire = one(tb, scen)
        print(f"MEAS {mode} {scen} run{i}: goodput {[round(x / 1e6, 2) for x in g]} "
              f"sum {sum(g) / 1e6:.2f} Mbit/s, Jain {jain:.4f}, class wire {wire / 1e6:.2f}")

TURN = r"""
import socket, sys, time
N = 50
if sys.argv[1] == "serve":
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("", int(sys.argv[2]))); ls.listen(1); print("READY", flush=True)
    c, _ = ls.accept(); tot = 0; t_turn = None; buckets = {}
    while True:
        b = c.recv(65536)
        if not b:
            break
        if tot < 64 * N:
            c.sendall(b)
        tot += len(b)
        if tot > 64 * N:
            now = time.time()
            if t_turn is None:
                t_turn = now
            k = int((now - t_turn) / 0.25)
            buckets[k] = buckets.get(k, 0) + len(b)
    print(" ".join(f"{buckets.get(k, 0) * 8 / 0.25 / 1e6:.2f}" for k in range(max(buckets) + 1)))
else:
    s = socket.socket(); s.connect((sys.argv[2], int(sys.argv[3])))
    for i in range(N):
        s.sendall(b"x" * 64); got = 0
        while got < 64:
            got += len(s.recv(4096))
        time.sleep(0.1)
    end = time.time() + float(sys.argv[4]); blk = b"y" * 65536
    while time.time() < end:
        s.sendall(blk)
    s.close()
"""

@pytest.mark.parametrize("mode", ["tcr", "ipabr"])
def test_turn(tb, mode):
    """A light connection (l1, 50 ping-pongs of 64 bytes, ~7 s) turns bulk for 8 s beside a
    bulk upload (l2, 18 s). The turned flow's rate per 0.25 s after the turn, and the
    bulk upload's 1-s goodputs."""
    restart(tb, mode)
    for i in range(2):
        srv = tb.popen("w1", [sys.executable, "-c", TURN, "serve", "5342"])
        assert srv.stdout.readline().strip() == "READY"
        cli = tb.popen("l1", [sys.executable, "-c", TURN, "talk", tb.addr("w1"), "5342", "8"])
        flows = traffic.iperf_flows(tb, n=1, duration=18, cc="cubic", pairs=[("l2", "w1")],
                                    base_port=5311)
        cli.communicate(timeout=30)
        out = srv.communicate(timeout=30)[0].strip()
        print(f"MEAS {mode} turn run{i}: turned flow Mbit/s per 0.25 s: {out}")
        print(f"MEAS {mode} turn run{i}: bulk upload 1-s goodput "
              f"{[round(x / 1e6, 2) for x in flows[0].interval_bps]}")

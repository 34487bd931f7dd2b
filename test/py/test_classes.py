"""Link sharing among classes in the testbed, with real Linux TCP (issue #3).

Two classes under a 30 Mbit/s link each way, gold (20 Mbit/s, prio 0) and bulk
(10 Mbit/s), each may borrow up to the link (conf/testbed-twoclass.cfg); rules
put flows to WAN ports 5201-5204 in gold and 5301-5304 in bulk. Class rates are
read from weir's own per-class byte counters (wire bytes, sampled every 0.2 s),
fairness from the receivers' goodput.

Then per-flow minimum guarantees with admission: the PostACK paper's example
(a 35 kbit/s class promising 10 kbit/s per flow) scaled up 100 times.
"""
import os
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from conftest import measure_twice, weir_testbed  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.traffic import PYTHON, BULK_SCRIPT, _dst_addr, jain, steady_bps  # noqa: E402

LINK, GOLD, BULK = 30e6, 20e6, 10e6
GOLD_PORT, BULK_PORT = 5201, 5301
STATS_INTERVAL = 0.2


def write_config(path, body_file=None, body=""):
    """The testbed's config with fast stats plus a shaping body (a conf/ file
    without its @include line, or text)."""
    if body_file:
        body = weirtb.conf_body(body_file)
    path.write_text(weirtb.testbed_config_text(body + "\n", stats_interval=STATS_INTERVAL))
    return path


class Sampler:
    """Polls weir's stats file and keeps (time, {class: bytes}) per direction."""

    def __init__(self, tb, direction):
        self.tb, self.direction = tb, direction
        self.samples, self._stop = [], threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._t.start()
        while not self.samples:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()

    def _run(self):
        last = None
        while not self._stop.is_set():
            st = self.tb.weir_stats()
            up = st["uptime_s"]
            if up != last:  # a fresh snapshot: stamp it with weir's own clock
                last = up
                cls = st["shaping"][self.direction]["classes"]
                self.samples.append((up, {k: v["bytes"] for k, v in cls.items()},
                                     {k: v for k, v in cls.items()}))
            time.sleep(STATS_INTERVAL / 4)

    def now(self):
        return self.samples[-1][0] if self.samples else 0.0

    def rate(self, cls, t0, t1):
        """Wire bit/s of class cls between weir times t0 and t1 (nearest samples)."""
        a = min(self.samples, key=lambda s: abs(s[0] - t0))
        b = min(self.samples, key=lambda s: abs(s[0] - t1))
        return (b[1][cls] - a[1][cls]) * 8 / (b[0] - a[0])

    def wait_until(self, t):
        while self.now() < t:
            time.sleep(0.05)


def run_flows(tb, results, key, **kw):
    results[key] = tb.iperf(**kw)


def start_flows(tb, specs):
    """Run several iperf groups concurrently; returns (threads, results)."""
    results, threads = {}, []
    for key, kw in specs.items():
        t = threading.Thread(target=run_flows, args=(tb, results, key), kwargs=kw, daemon=True)
        t.start()
        threads.append(t)
    return threads, results


@pytest.fixture(scope="module")
def classes_tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("classes")
    cfg = write_config(d / "twoclass.cfg", body_file="testbed-twoclass.cfg")
    # Equal 10 ms RTT paths: this checks the scheduler, not TCP's RTT bias.
    with weir_testbed(cfg, lan=2, wan=2, paths=[PathSpec(delay=5), PathSpec(delay=5)]) as tb:
        tb.cfg_dir = d
        yield tb


def restart_weir(tb, cfg):
    os.environ["WEIR_TESTBED_CFG"] = str(cfg)
    tb.start_gateway("weir")


@pytest.mark.parametrize("reverse", [False, True], ids=["outbound", "inbound"])
def test_two_classes_hold_their_rates(classes_tb, reverse):
    tb = classes_tb
    direction = "inbound" if reverse else "outbound"
    dur = 16

    def run():
        with Sampler(tb, direction) as s:
            t_start = s.now()
            threads, res = start_flows(tb, {
                "gold": dict(n=4, duration=dur, reverse=reverse, base_port=GOLD_PORT),
                "bulk": dict(n=4, duration=dur, reverse=reverse, base_port=BULK_PORT)})
            for t in threads:
                t.join()
        # The 10 s after slow start and queue build-up, by weir's clock.
        t0 = t_start + 4
        return s, res, s.rate("gold", t0, t0 + 10), s.rate("bulk", t0, t0 + 10)

    s, res, gold, bulk = measure_twice(
        run, lambda r: abs(r[2] / GOLD - 1) <= 0.02 and abs(r[3] / BULK - 1) <= 0.02)
    fair = {}
    for key in ("gold", "bulk"):
        flows = res[key]
        assert all(f.error is None for f in flows), [f.error for f in flows]
        steady = [steady_bps(f.interval_bps, 4, 14) for f in flows]
        fair[key] = (jain(steady), [round(x / 1e6, 2) for x in steady])
    last = s.samples[-1][2]
    print(f"{direction}: gold {gold / 1e6:.3f} Mbit/s, bulk {bulk / 1e6:.3f} Mbit/s (wire); "
          f"Jain gold {fair['gold'][0]:.4f} {fair['gold'][1]}, bulk {fair['bulk'][0]:.4f} "
          f"{fair['bulk'][1]}; drops gold {last['gold']['drops_flow']}, bulk "
          f"{last['bulk']['drops_flow']}")
    assert abs(gold / GOLD - 1) <= 0.02, gold
    assert abs(bulk / BULK - 1) <= 0.02, bulk
    assert fair["gold"][0] >= 0.98 and fair["bulk"][0] >= 0.98, fair
    assert last["gold"]["admitted"] >= 8 and last["bulk"]["admitted"] >= 8  # data + control


def test_borrowing_follows_demand(classes_tb):
    """bulk alone borrows the idle link; gold's arrival takes its 20 Mbit/s back
    within 1 s; when gold leaves, bulk returns to the ceiling within 1 s."""
    tb = classes_tb

    def run():
        with Sampler(tb, "outbound") as s:
            t_bulk = s.now()
            threads, res = start_flows(tb, {"bulk": dict(n=4, duration=16, base_port=BULK_PORT)})
            s.wait_until(t_bulk + 5)
            t_gold = s.now()
            gthreads, gres = start_flows(tb, {"gold": dict(n=4, duration=6, base_port=GOLD_PORT)})
            for t in gthreads + threads:
                t.join()
            # When did gold's data stop? The first sample after its bytes stop growing.
            gold_end = next(t for (t, b, _), (t2, b2, _) in zip(s.samples, s.samples[1:])
                            if t > t_gold + 3 and b2["gold"] == b["gold"])
        alone = s.rate("bulk", t_bulk + 2, t_gold)
        # iperf3's handshake takes a few round trips after the process starts.
        gold_first = next(t for t, b, _ in s.samples if t > t_gold and
                          b["gold"] > s.samples[0][1]["gold"] + 100_000)
        # "Within 1 s": the second after the first one must already be at the rate.
        return dict(alone=alone,
                    gold_in=s.rate("gold", gold_first + 1, gold_first + 2),
                    bulk_in=s.rate("bulk", gold_first + 1, gold_first + 2),
                    back=s.rate("bulk", gold_end + 1, gold_end + 2))

    def good(r):
        return (r["alone"] >= 0.97 * LINK and r["gold_in"] >= 0.95 * GOLD
                and r["bulk_in"] <= 1.15 * BULK and r["back"] >= 0.95 * LINK)

    r = measure_twice(run, good)
    print(f"bulk alone {r['alone'] / 1e6:.2f}, with gold: gold {r['gold_in'] / 1e6:.2f} bulk "
          f"{r['bulk_in'] / 1e6:.2f}, bulk after gold {r['back'] / 1e6:.2f} Mbit/s")
    assert r["alone"] >= 0.97 * LINK, r
    assert r["gold_in"] >= 0.95 * GOLD and r["bulk_in"] <= 1.15 * BULK, r
    assert r["back"] >= 0.95 * LINK, r


def test_udp_flood_does_not_move_the_other_class(classes_tb):
    """gold's TCP goodput with bulk saturated by TCP vs by a 100 Mbit/s UDP
    flood (unresponsive, 3x the link): the difference must stay within 2%."""
    tb = classes_tb

    def run():
        goodput = {}
        for load in ("tcp", "udp"):
            extra = ("-u", "-b", "100M", "-l", "1400") if load == "udp" else ()
            threads, res = start_flows(tb, {
                "gold": dict(n=4, duration=12, base_port=GOLD_PORT),
                "bulk": dict(n=1 if load == "udp" else 4, duration=12, base_port=BULK_PORT,
                             extra_args=extra)})
            for t in threads:
                t.join()
            assert all(f.error is None for f in res["gold"]), [f.error for f in res["gold"]]
            goodput[load] = sum(steady_bps(f.interval_bps, 4, 12)
                                for f in res["gold"])
        return goodput

    goodput = measure_twice(run, lambda g: abs(g["udp"] / g["tcp"] - 1) <= 0.02)
    st = tb.weir_stats()["shaping"]["outbound"]["classes"]
    print(f"gold goodput: bulk=TCP {goodput['tcp'] / 1e6:.3f}, bulk=UDP flood "
          f"{goodput['udp'] / 1e6:.3f} Mbit/s; bulk drops {st['bulk']['drops_flow']}")
    assert st["bulk"]["drops_flow"] + st["bulk"]["drops_class"] > 1000  # the flood was shed
    assert abs(goodput["udp"] / goodput["tcp"] - 1) <= 0.02, goodput


# ----- per-flow minimum with admission ------------------------------------------------
ADMISSION = """
shaping = {
  outbound = {
    rate = "30mbit";
    default = "bulk";
    classes = (
      { name = "voice"; rate = "3.5mbit"; ceil = "3.5mbit"; flow_min = "1mbit"; admission = "drop"; },
      { name = "video"; rate = "3.5mbit"; ceil = "3.5mbit"; flow_min = "1mbit"; fallback = "bulk"; },
      { name = "bulk"; rate = "10mbit"; }
    );
  };
  inbound = "30mbit";
};
rules = (
  { class = "voice"; proto = "tcp"; wan_port = "6001-6010"; },
  { class = "video"; proto = "tcp"; wan_port = "6101-6110"; }
);
"""


def start_bulk(tb, src, dst, port, nbytes, timeout=90):
    """Start a byte-verified transfer; returns (receiver, sender) processes."""
    rx = tb.popen(dst, [PYTHON, str(BULK_SCRIPT), "recv", "--port", str(port),
                        "--timeout", str(timeout)])
    assert rx.stdout.readline().strip() == "READY"
    tx = tb.popen(src, [PYTHON, str(BULK_SCRIPT), "send", "--host", _dst_addr(tb, dst),
                        "--port", str(port), "--bytes", str(nbytes), "--timeout", str(timeout)])
    return rx, tx


def finish(procs, timeout=90):
    import json
    out = []
    for rx, tx in procs:
        o, e = tx.communicate(timeout=timeout)
        assert tx.returncode == 0, e
        ro, _ = rx.communicate(timeout=timeout)
        out.append((json.loads(o), json.loads(ro)))
    return out


@pytest.mark.parametrize("cls,base", [("voice", 6001), ("video", 6101)], ids=["drop", "fallback"])
def test_per_flow_minimum_admission(classes_tb, cls, base):
    """3.5 Mbit/s, 1 Mbit/s per flow: three flows fit, a fourth would leave each
    0.875. 'drop' refuses its SYNs until one of the three has ended; 'fallback'
    shapes it in bulk instead."""
    tb = classes_tb
    restart_weir(tb, write_config(tb.cfg_dir / "admission.cfg", body=ADMISSION))
    try:
        first = [start_bulk(tb, "l1" if i % 2 else "l2", "w1", base + i, 1_200_000) for i in range(3)]
        time.sleep(1.5)
        fourth = start_bulk(tb, "l1", "w2", base + 3, 300_000)
        time.sleep(2.5)
        mid = tb.weir_stats()["shaping"]["outbound"]["classes"]
        done = finish(first + [fourth])
        end = tb.weir_stats()
        c = end["shaping"]["outbound"]["classes"]
        print(f"{cls}: while 3 ran: {mid[cls]['flows']} flows, refused {mid[cls]['refused']}, "
              f"diverted {mid[cls]['diverted']}; at the end admitted {c[cls]['admitted']}, "
              f"refused packets {end['ports']['lan']['refused']}")
        for s, r in done:
            assert s["bytes"] == r["bytes"] and s["sha256"] == r["sha256"]
        assert mid[cls]["flows"] == 3 and mid[cls]["refused"] == 1
        if cls == "voice":
            assert mid[cls]["diverted"] == 0
            # Its SYN retries were dropped until a flow ended; then it got in.
            assert end["ports"]["lan"]["refused"] >= 2
            assert c[cls]["admitted"] == 4
        else:
            assert mid[cls]["diverted"] == 1 and mid["bulk"]["admitted"] >= 1
            assert c[cls]["admitted"] == 3
    finally:
        restart_weir(tb, tb.cfg_dir / "twoclass.cfg")

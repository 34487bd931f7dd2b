#!/usr/bin/python3
"""Issue 42 items 1-2: what a large Lua policy costs the management lcore. Starts weir on
net_pcap ports (as test/py/test_rest.py does; root), uploads one policy with
PUT /api/v1/policy while a client polls GET /api/v1/status every 20 ms (5 s timeout),
and prints: the PUT's answer time and status, the worst and median /status latency and
the failures during the PUT and for SETTLE seconds after it, weir's RSS before and its
peak (VmHWM) after, and the timer hooks' calls and wakes_over_budget.

  sudo WEIR_BUILD_DIR=build scripts/bench_policy_stall.py rules 1000000
  sudo WEIR_BUILD_DIR=build scripts/bench_policy_stall.py rules 16384
  sudo WEIR_BUILD_DIR=build scripts/bench_policy_stall.py timers 1000000
  sudo WEIR_BUILD_DIR=build scripts/bench_policy_stall.py busytimers 256
  sudo WEIR_BUILD_DIR=build scripts/bench_policy_stall.py customers 16384 --max-rules 16384 --reload
"""
import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "test" / "py"))
from test_rest import script_weir  # noqa: E402

PREFIX = """\
weir.link{ dir = "outbound", rate = "30mbit", default = "bulk" }
weir.class{ dir = "outbound", name = "bulk", rate = "10mbit" }
weir.link{ dir = "inbound", rate = "30mbit" }
"""
BODY = {
    # the loop
    "rules": 'for i = 1, {n} do weir.rule{{ class = "bulk", wan_port = i % 65535 + 1 }} end\n',
    # one customer /24 and port each: what an ISP's rule list looks like
    "customers": 'for i = 1, {n} do weir.rule{{ class = "bulk", lan = string.format('
                 '"10.%d.%d.0/24", i // 256 % 256, i % 256), wan_port = i % 65535 + 1 }} end\n',
    "timers": 'for i = 1, {n} do weir.every(0.1, function() end) end\n',
    # timers with work in them: ~1 ms of Lua each (256 is the limit)
    "busytimers": 'for i = 1, {n} do weir.every(0.1, function() local t = 0 '
                  'for k = 1, 100000 do t = t + k end end) end\n',
}


def kb(pid, key):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=sorted(BODY))
    ap.add_argument("n", type=int)
    ap.add_argument("--settle", type=float, default=12.0, help="seconds polled after the PUT")
    ap.add_argument("--max-rules", type=int, default=0,
                    help="policy.max_rules in weir's config (0: its default, 4096)")
    ap.add_argument("--reload", action="store_true",
                    help="then POST /api/v1/policy/reload (what SIGHUP does) and measure it too")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        w, _ = script_weir(Path(d), f"stall-{a.kind}",
                           f"max_rules = {a.max_rules}; " if a.max_rules else "")
        try:
            time.sleep(1)
            pid = w.p.pid
            rss0 = kb(pid, "VmRSS")
            lat, fail, done = [], [], []   # latencies, failures, answer times
            stop = threading.Event()

            def poll():
                while not stop.is_set():
                    t0 = time.monotonic()
                    try:
                        status, _ = w.get("/api/v1/status", timeout=5)
                        (lat if status == 200 else fail).append(time.monotonic() - t0)
                        done.append(time.monotonic())
                    except OSError as e:
                        fail.append(repr(e))
                    time.sleep(0.02)

            t = threading.Thread(target=poll, daemon=True)
            t.start()
            time.sleep(0.5)
            text = PREFIX + BODY[a.kind].format(n=a.n)
            t0 = time.monotonic()
            status, _, data = w.request("PUT", "/api/v1/policy", body=text.encode(),
                                        headers={"Content-Type": "text/x-lua"}, timeout=120)
            put_s = time.monotonic() - t0
            time.sleep(a.settle)
            if a.reload:
                t1 = time.monotonic()
                rstatus, _, rdata = w.request("POST", "/api/v1/policy/reload", timeout=120)
                reload_s = time.monotonic() - t1
                time.sleep(a.settle)
            stop.set()
            t.join()
            c = w.get("/api/v1/counters", timeout=30)[1]
            hooks = c.get("hooks") or {}
            print(f"{a.kind} {a.n}: PUT {status} in {put_s:.2f} s: {data[:160]!r}")
            # The stall: the longest time from the PUT's start on without an answer
            # (up to the reload, if there is one).
            marks = [t0] + [x for x in done if x > t0 and (not a.reload or x < t1)]
            gap = max(b - a for a, b in zip(marks, marks[1:])) if len(marks) > 1 else \
                time.monotonic() - t0
            print(f"  /status: longest without an answer {gap:.2f} s; {len(lat)} answered, "
                  f"worst {max(lat) * 1e3:.0f} ms, median "
                  f"{statistics.median(lat) * 1e3:.1f} ms, {len(fail)} failed {fail[:3]}")
            if a.reload:
                marks = [t1] + [x for x in done if x > t1]
                rgap = max(b - a for a, b in zip(marks, marks[1:])) if len(marks) > 1 else 0
                print(f"  reload {rstatus} in {reload_s:.2f} s: {rdata[:80]!r}; /status "
                      f"longest without an answer {rgap:.2f} s")
            print(f"  RSS {rss0 / 1024:.0f} MB before, peak {kb(pid, 'VmHWM') / 1024:.0f} MB, "
                  f"now {kb(pid, 'VmRSS') / 1024:.0f} MB")
            print(f"  timer calls {hooks.get('hooks', {}).get('timer', {}).get('calls')}, "
                  f"wakes_over_budget {hooks.get('wakes_over_budget')}")
        finally:
            try:
                w.stop()
            except AssertionError:      # before 7749b9a: SIGSEGV at exit after ACL tries
                print(f"  weir's exit status: {w.p.returncode}")


if __name__ == "__main__":
    main()

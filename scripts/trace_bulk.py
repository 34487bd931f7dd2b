#!/usr/bin/python3
"""One `scripts/fct.py bulk` run, traced (issue 23, tcr with bbr).

    scripts/trace_bulk.py MODE CC RTT_MS RATE FLOWS SECONDS up|down OUTDIR

The same testbed, class and iperf3 flows as `fct.py bulk` (one WAN host on a path of
RTT_MS, MODE each way at RATE, or `htb`), one direction, and it keeps: `ss -tin` of the
sender every 0.2 s (OUTDIR/ss.txt: cwnd, pacing and delivery rates, bbr's state,
snd_wnd, rwnd_limited), weir's stats every second (stats.json: queues, young and new
flows, CoDel drops, paced ACKs) and the per-second goodput (result.json). With
BURST=US in the environment weir's class buckets are BURST us deep (shaping.burst_us).
Root, Debian's python3; WEIR_BUILD_DIR picks the build, as for the testbed.
"""
import json
import sys
import threading
import time
import tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import fct
from weirtb import traffic
mode, cc, rtt, rate, nfl, secs, dirn, out = sys.argv[1:9]
import os
if os.environ.get("BURST"):
    _wc = fct.weir_config
    def _patched(path, mode, rate):
        p = _wc(path, mode, rate)
        p.write_text(p.read_text().replace("shaping = {", "shaping = { burst_us = %s;" % os.environ["BURST"], 1))
        return p
    fct.weir_config = _patched
rtt = float(rtt); nfl = int(nfl); secs = int(secs); rev = dirn == "down"
out = Path(out); out.mkdir(parents=True, exist_ok=True)
with tempfile.TemporaryDirectory() as cfgs, fct.testbed(1, rtt) as tb:
    fct.start_gateway(tb, mode, rate, Path(cfgs))
    snd = "w1" if rev else "l1"
    stop = threading.Event(); ss = []; st = []
    def sample():
        t0 = time.time(); last = 0
        while not stop.is_set():
            r = tb.run(snd, ["ss", "-tin", "state", "established"], check=False)
            ss.append((time.time() - t0, r.stdout))
            if mode != "htb" and time.time() - last > 1:
                last = time.time()
                try:
                    st.append((time.time() - t0, tb.weir_stats()))
                except Exception as e:
                    pass
            time.sleep(0.2)
    th = threading.Thread(target=sample, daemon=True); th.start()
    flows = traffic.iperf_flows(tb, n=nfl, duration=secs, reverse=rev, cc=cc, pairs=[("l1", "w1")] * nfl)
    stop.set(); th.join()
    half = secs // 2
    bps = sum(traffic.steady_bps(f.interval_bps, half) for f in flows)
    per = [[round(x / 1e6, 2) for x in f.interval_bps] for f in flows]
    res = dict(mode=mode, cc=cc, rtt=rtt, rate=rate, flows=nfl, dir=dirn, mbps=bps / 1e6,
               of_payload=bps / (fct.parse_rate(rate) * fct.PAYLOAD), per_second=per)
    (out / "result.json").write_text(json.dumps(res, indent=1))
    (out / "ss.txt").write_text("".join(f"@{t:.2f}\n{s}\n" for t, s in ss))
    (out / "stats.json").write_text(json.dumps(st))
    fct.stop_gateway(tb)
    print(mode, cc, rtt, rate, nfl, dirn, "of_payload %.3f" % res["of_payload"], per)

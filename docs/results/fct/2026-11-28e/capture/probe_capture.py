"""The capture behind this directory, as a pytest module to copy into test/py/ and run
(`WEIR_BUILD_DIR=... PROBE_OUT=DIR python3 -m pytest -s test/py/probe_capture.py`):
pfq at 10 ms, 4 bulk downloads (l2) started 2.5 s before five 100 KB downloads (l1),
tcpdump on l1, l2 and w1 during the transfers, the inbound class counters before and
after. Then `ana_transfers.py DIR` and `ana_bins.py DIR CLIENT_PORT`. PROBE_MODE,
PROBE_N (bulk downloads), PROBE_DUR (their seconds) and PROBE_REPS (1 MB downloads
instead of 100 KB ones) vary it: tcr16-probe.txt is PROBE_MODE=tcr PROBE_N=16
PROBE_DUR=30 PROBE_REPS=3."""
import json
import os
import subprocess
import threading
import time

from test_short_path import st_tb10  # noqa: F401 (the 10 ms testbed fixture)
from test_short_transfers import fetch_1m, restart, traffic

OUT = os.environ.get("PROBE_OUT", "/tmp/probe")
MODE = os.environ.get("PROBE_MODE", "pfq")
N = int(os.environ.get("PROBE_N", "4"))
DUR = int(os.environ.get("PROBE_DUR", "8"))
REPS = int(os.environ.get("PROBE_REPS", "0"))


def test_probe(st_tb10):  # noqa: F811
    tb = st_tb10
    os.makedirs(OUT, exist_ok=True)
    restart(tb, MODE)
    fetch_1m(tb, "100k", 102400)
    idle = [fetch_1m(tb, "100k", 102400) for _ in range(3)]
    res = {}
    bulk = threading.Thread(target=lambda: res.update(flows=traffic.iperf_flows(
        tb, n=N, duration=DUR, reverse=True, cc="cubic", pairs=[("l2", "w1")] * N,
        base_port=5301)), daemon=True)
    bulk.start()
    time.sleep(2.5)
    caps = [tb.popen(ns, ["tcpdump", "-i", "eth0", "-s", "96", "-w", f"{OUT}/{ns}.pcap"],
                     stderr=subprocess.DEVNULL) for ns in ("l1", "w1", "l2")]
    time.sleep(0.5)
    s0 = tb.weir_stats()["shaping"]["inbound"]["classes"]
    loaded = ([fetch_1m(tb) for _ in range(REPS)] if REPS else
              [fetch_1m(tb, "100k", 102400) for _ in range(5)])
    s1 = tb.weir_stats()["shaping"]["inbound"]["classes"]
    time.sleep(0.3)
    for c in caps:
        c.terminate()
    bulk.join()
    print("idle", idle, "loaded", loaded)
    with open(f"{OUT}/stats.json", "w") as fh:
        json.dump({"s0": s0, "s1": s1, "idle": idle, "loaded": loaded}, fh, indent=1)

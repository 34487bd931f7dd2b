#!/usr/bin/python3
"""By hand: the dashboard under traffic, for docs/img/dashboard.png, and the figures of
docs/results/dashboard/README.md (page load time in headless Chromium, API latency and a
class's shaped rate with 50 browser-like pollers).

weir runs conf/testbed-twoclass.cfg in the testbed (API on 127.0.0.1:8080 in its
namespace); two iperf3 flows in gold (10 and 50 ms paths) and one in bulk (150 ms). The
page runs for --dwell seconds, bulk's rate is set to 5mbit from the page halfway, then
the screenshot. Then scripts/dashboard_load.py runs with 50 pollers at the page's pace,
4 times it, and back to back, each with a phase of the same CPU burnt without requests.

  sudo WEIR_BUILD_DIR=build scripts/dashboard_screenshot.py [--dwell 60] [--no-bench]
"""
import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb import PathSpec, Testbed  # noqa: E402
from weirtb.config import SHARED_CORES_BURST_US  # noqa: E402

PORT = 8080
PYTHON = "/usr/bin/python3"
OUT = REPO / "docs" / "results" / "dashboard"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dwell", type=float, default=60)
    ap.add_argument("--png", default=str(REPO / "docs" / "img" / "dashboard.png"))
    ap.add_argument("--no-bench", action="store_true")
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    Path(a.png).parent.mkdir(parents=True, exist_ok=True)
    cfg = OUT / "dashboard.cfg"
    body = weirtb.conf_body("testbed-twoclass.cfg").replace(
        "shaping = {", f"shaping = {{ burst_us = {SHARED_CORES_BURST_US};", 1)
    cfg.write_text(weirtb.testbed_config_text(body + f"\nmanagement = {{ port = {PORT}; }};\n"))
    os.environ["WEIR_TESTBED_CFG"] = str(cfg)
    results = {}
    with Testbed(lan=2, wan=3, paths=weirtb.paper_paths(3)) as tb:
        secs = int(a.dwell + 40)
        flows = [threading.Thread(target=tb.iperf, kwargs=dict(n=2, duration=secs, base_port=5201,
                                                              pairs=[("l1", "w1"), ("l2", "w2")])),
                 threading.Thread(target=tb.iperf, kwargs=dict(n=1, duration=secs, base_port=5301,
                                                              pairs=[("l1", "w3")]))]
        for t in flows:
            t.start()
        cp = tb.run("gw", [PYTHON, str(REPO / "scripts" / "dashboard_browser.py"),
                           "--url", f"http://127.0.0.1:{PORT}/dashboard/", "--sample", "6",
                           "--class", "outbound/bulk", "--set-rate", "5mbit", "--dwell", str(a.dwell),
                           "--screenshot", a.png], timeout=a.dwell + 120)
        results["browser"] = json.loads(cp.stdout.splitlines()[-1])
        for t in flows:
            t.join()
        print(json.dumps({k: v for k, v in results["browser"].items() if k != "samples"}, indent=1))
        if not a.no_bench:
            results["load"] = []
            tb.run("gw", ["curl", "-sf", "-X", "PATCH", "-H", "Content-Type: application/json",
                          "-d", '{"rate": "8mbit", "ceil": "8mbit", "mode": "pfq"}',
                          f"http://127.0.0.1:{PORT}/api/v1/classes/outbound/gold"])
            for interval in (1.0, 0.25, 0.0):
                t = threading.Thread(target=tb.iperf, kwargs=dict(n=1, duration=34, base_port=5201,
                                                                 pairs=[("l1", "w1")]))
                t.start()
                time.sleep(4)
                cp = tb.run("gw", [PYTHON, str(REPO / "scripts" / "dashboard_load.py"), "--port", str(PORT),
                                   "--clients", "50", "--interval", str(interval), "--seconds", "6",
                                   "--class", "outbound/gold", "--cpu", "0", "--burn"], timeout=120)
                t.join()
                r = json.loads(cp.stdout.splitlines()[-1])
                results["load"].append(r)
                for p in r["phases"]:
                    print(interval, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in p.items()})
    if "load" not in results and (OUT / "latest.json").exists():
        # --no-bench: the last benchmark's figures stay beside the new page's.
        results["load"] = json.loads((OUT / "latest.json").read_text()).get("load", [])
    (OUT / "latest.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {a.png} and {OUT / 'latest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""What many dashboards cost: N browser-like clients poll weir's API as the
dashboard's page does, while a good API client (weirctl's way: a new
connection, one GET /api/v1/status) measures how long it waits, and weir's own
counters give the rate the worker forwards with and without the pollers.

Phases of --seconds each: idle, load (N pollers), [burn,] idle. Prints one JSON object.
Run it where weir's API is reachable (in the testbed: weir's namespace,
`scripts/testbed exec gw scripts/dashboard_load.py ...`). Used by
test/py/test_dashboard.py; figures in docs/results/dashboard/.

A poller does what app/weir/dashboard/app.js does: loads the page's files
(then revalidates them with If-None-Match), reads openapi.json, and then every
--interval seconds GET status and counters; every 2nd time flows?limit=500,
hosts and subscribers; every 5th time classes and policy. --interval 1 is a
real browser; 0 polls back to back (a storm of them)."""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

PAGE = ("/dashboard/", "/dashboard/app.js", "/dashboard/style.css")


class Client:
    def __init__(self, host, port, token):
        self.host, self.port, self.token = host, port, token
        self.c = None

    def get(self, path, headers=None):
        h = dict(headers or {})
        if self.token and not path.startswith("/dashboard"):
            h["Authorization"] = f"Bearer {self.token}"
        for attempt in (0, 1):
            try:
                if self.c is None:
                    self.c = http.client.HTTPConnection(self.host, self.port, timeout=10)
                self.c.request("GET", path, headers=h)
                r = self.c.getresponse()
                data = r.read()
                return r.status, r.getheader("ETag"), data
            except (OSError, http.client.HTTPException):
                if self.c is not None:
                    self.c.close()
                self.c = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def poller(host, port, token, interval, stop, stats, lock):
    cl = Client(host, port, token)
    n = reqs = errs = 0
    etags = {}

    def get(path, ok=(200, 304, 404), **kw):
        nonlocal reqs, errs
        reqs += 1
        try:
            st, etag, _ = cl.get(path, **kw)
        except (OSError, http.client.HTTPException):
            errs += 1
            return None
        if st not in ok:
            errs += 1
        return etag

    for loads in (0, 1):          # the page loaded, then loaded again from cache
        for p in PAGE:
            etags[p] = get(p, headers={"If-None-Match": etags[p]} if etags.get(p) else None) or etags.get(p)
    get("/api/v1/openapi.json")
    while not stop.is_set():
        t0 = time.monotonic()
        get("/api/v1/status")
        get("/api/v1/counters")
        if n % 5 == 0:
            get("/api/v1/classes")
            get("/api/v1/policy")
        if n % 2 == 0:
            get("/api/v1/flows?limit=500")
            get("/api/v1/hosts")
            get("/api/v1/subscribers")
        n += 1
        stop.wait(max(0.0, interval - (time.monotonic() - t0)))
    with lock:
        stats["requests"] += reqs
        stats["errors"] += errs
        stats["polls"] += n


def good_client(host, port, token, stop, lat, errors):
    """weirctl's way: a new connection for one GET /api/v1/status, 10 a second."""
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            c = http.client.HTTPConnection(host, port, timeout=10)
            c.request("GET", "/api/v1/status",
                      headers={"Authorization": f"Bearer {token}"} if token else {})
            r = c.getresponse()
            r.read()
            c.close()
            if r.status != 200:
                errors.append(r.status)
        except (OSError, http.client.HTTPException) as e:
            errors.append(str(e))
        lat.append(time.monotonic() - t0)
        stop.wait(0.1)


def counters(cl):
    st, _, data = cl.get("/api/v1/counters")
    assert st == 200, (st, data[:200])
    return json.loads(data)


def rates(c0, c1, cls):
    dt = c1["uptime_s"] - c0["uptime_s"]
    out = {"seconds": dt,
           "link_out_bps": (c1["ports"]["wan"]["tx_bytes"] - c0["ports"]["wan"]["tx_bytes"]) * 8 / dt,
           "link_in_bps": (c1["ports"]["lan"]["tx_bytes"] - c0["ports"]["lan"]["tx_bytes"]) * 8 / dt}
    if cls:
        d, name = cls.split("/", 1)
        out["class_bps"] = (c1["shaping"][d]["classes"][name]["bytes"]
                            - c0["shaping"][d]["classes"][name]["bytes"]) * 8 / dt
    w0, w1 = c0.get("workers") or [], c1.get("workers") or []
    out["worker_busy"] = [(b["busy_s"] - a["busy_s"]) / dt for a, b in zip(w0, w1)]
    return out


BURN = "import time\nend = time.monotonic() + float(__import__('sys').argv[1])\nwhile time.monotonic() < end: pass\n"


def burner(stop, seconds):
    """The CPU a poller storm takes without a request: two processes spinning
    where the pollers run, as the pollers and the management lcore are two
    busy threads there."""
    procs = [subprocess.Popen([sys.executable, "-c", BURN, str(seconds)]) for _ in range(2)]
    stop.wait()
    for p in procs:
        p.kill()
        p.wait()


def phase(host, port, token, seconds, clients, interval, cls, burn=False):
    stop = threading.Event()
    lock = threading.Lock()
    stats = {"requests": 0, "errors": 0, "polls": 0}
    lat, errors = [], []
    meter = Client(host, port, token)
    if burn:
        threads = [threading.Thread(target=burner, args=(stop, seconds + 5))]
    else:
        threads = [threading.Thread(target=poller, args=(host, port, token, interval, stop, stats, lock))
                   for _ in range(clients)]
    for t in threads:
        t.start()
    time.sleep(min(1.0, seconds / 4) if clients else 0)   # the pollers connected and loaded
    g = threading.Thread(target=good_client, args=(host, port, token, stop, lat, errors))
    g.start()
    c0 = counters(meter)
    time.sleep(seconds)
    c1 = counters(meter)
    stop.set()
    for t in threads + [g]:
        t.join()
    lat.sort()
    return {"clients": clients, "burn": burn, **rates(c0, c1, cls), **stats,
            "req_per_s": stats["requests"] / (seconds + min(1.0, seconds / 4)) if clients else 0,
            "good": {"n": len(lat), "errors": errors[:5], "n_errors": len(errors),
                     "median_ms": statistics.median(lat) * 1e3 if lat else None,
                     "p99_ms": lat[int(len(lat) * 0.99)] * 1e3 if lat else None,
                     "max_ms": lat[-1] * 1e3 if lat else None}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--token-file")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between a poller's polls")
    ap.add_argument("--seconds", type=float, default=6.0, help="length of each phase")
    ap.add_argument("--class", dest="cls", help="DIR/NAME: that class's rate too")
    ap.add_argument("--burn", action="store_true",
                    help="a phase of two processes spinning instead of the pollers (between "
                         "the load and the last idle phase): the CPU taken without a request")
    ap.add_argument("--cpu", type=int, help="run the clients on this CPU only (the management lcore's)")
    a = ap.parse_args()
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})
    token = open(a.token_file).read().strip() if a.token_file else None
    out = {"interval_s": a.interval, "phases": []}
    plan = [(0, False), (a.clients, False), (0, False)]
    if a.burn:
        plan[2:2] = [(a.clients, True)]
    for n, burn in plan:
        out["phases"].append(phase(a.host, a.port, token, a.seconds, n, a.interval, a.cls, burn))
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""How long from a subscriber change's request to the new plan in force on every worker?
(docs/subscribers.md "Live changes")

For each subscriber count N (--counts), starts weir on two net_null ports (no namespace, no
NIC) with N LibreQoS subscribers under --nodes access points, then:

  get      --changes GET /api/v1/subscribers/{id}: what answering alone costs.
  one      --changes PATCH /api/v1/subscribers/{id} of one plan each (alternating 20/30 Mbit/s
           download max), timed from the request to the answer: weir answers once every
           worker took the change (subs_live.c waits for it), so that is request -> in force.
           IN_FORCE: weir's own figure (subs_live.last_us in /api/v1/counters) from taking
           the change up (the copy of the set included) until every worker applied it;
           WORKER_MS: the slowest worker's posting -> applied (class_cmds.lat_last_us).
           MS: the whole request as the client sees it, the answer's stats snapshot
           included (compare with `get`).
  batch    every subscriber's download max changed in ShapedDevices.csv, then
           POST /api/v1/subscribers/reload: N changes at once, timed the same way.

Each answer must say the change went in place ("in_place": true): a policy switch instead
is reported as such, not counted as a live change. A count weir refuses to load is
reported with weir's reason. Writes a CSV (--csv) and prints a table. Run as root from
the repository (weir built in $WEIR_BUILD_DIR or ./build):

  nice -n 19 scripts/subs_live_bench.py [--counts 1000,10000,100000] [--workers 1]
"""
import argparse
import csv
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from weirtb import weir_config_text  # noqa: E402

HEADER = ("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,"
          "Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,"
          "Download Max Mbps,Upload Max Mbps,Comment\n")


def write_files(d, n, nodes, down_max):
    """n circuits of one /32 and one /56 each, spread over `nodes` access points."""
    net = {f"AP{k}": {"downloadBandwidthMbps": 10000, "uploadBandwidthMbps": 10000,
                      "type": "AP"} for k in range(nodes)}
    (d / "network.json").write_text(json.dumps(net))
    rows = [f"c{i},circuit {i},d{i},cpe,AP{i % nodes},,,,10.{i >> 16 & 255}.{i >> 8 & 255}."
            f"{i & 255},2001:db8:{i >> 8:x}:{i & 255:x}00::/56,1,1,{down_max},10,\n"
            for i in range(n)]
    (d / "ShapedDevices.csv").write_text(HEADER + "".join(rows))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        hdr = {"Content-Type": "application/json"} if body is not None else {}
        t0 = time.perf_counter()
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers=hdr)
        r = c.getresponse()
        data = json.loads(r.read())
        return r.status, data, time.perf_counter() - t0
    finally:
        c.close()


def lat_us(port):
    """(weir's in-force time of the last change: from taking it up until every worker
    applied it, and the slowest worker's own posting -> applied), microseconds."""
    st = call(port, "GET", "/api/v1/counters")[1]
    return (st["subs_live"]["last_us"],
            max(w["class_cmds"]["lat_last_us"] for w in st["workers"]))


def run_count(n, args, weir):
    out = []
    with tempfile.TemporaryDirectory(prefix="subs_live.") as d:
        d = Path(d)
        write_files(d, n, args.nodes, 50)
        port = free_port()
        workers = ", ".join(str(i) for i in range(1, args.workers + 1))
        body = ('shaping = { outbound = "100gbit"; inbound = "100gbit"; };\n'
                'subscribers = { shaped_devices = "ShapedDevices.csv"; network = "network.json"; };\n'
                f"management = {{ port = {port}; }};\n")
        text = weir_config_text("net_null0,no-rx=1", "net_null1,no-rx=1",
                                prefix=f"subslive-{os.getpid()}", mem_mb=args.mem_mb,
                                mbufs=8191 * args.workers,
                                body=body)
        if args.workers > 1:
            # More threads than the VM's CPUs: let them float (as the testbed does);
            # net_null queues per worker.
            lcores = ",".join(f"{i}@(0-{os.cpu_count() - 1})" for i in range(args.workers + 1))
            text = text.replace('"--log-level=error"', f'"--log-level=error", "--lcores={lcores}"')
            text = text.replace("workers = [1];", f"workers = [{workers}];")
        (d / "weir.cfg").write_text(text)
        t0 = time.perf_counter()
        p = subprocess.Popen([str(weir), "--", "--config", str(d / "weir.cfg")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            while True:
                if p.poll() is not None:
                    why = p.stderr.read().strip().splitlines()
                    return [{"subscribers": n, "kind": "load", "note": (why or ["exited"])[-1]}]
                try:
                    if call(port, "GET", "/api/v1/status")[0] == 200:
                        break
                except OSError:
                    pass
                if time.perf_counter() - t0 > 300:
                    return [{"subscribers": n, "kind": "load", "note": "not up in 300 s"}]
                time.sleep(0.1)
            out.append({"subscribers": n, "kind": "load", "changes": 0,
                        "ms": round((time.perf_counter() - t0) * 1e3, 1), "note": "start-up"})
            # The answer's own cost: a PATCH answers with the subscriber as GET does
            # (its figures from a stats snapshot of every class).
            gets = [call(port, "GET", f"/api/v1/subscribers/c{(k * 7919) % n}")[2] * 1e3
                    for k in range(args.changes)]
            out.append({"subscribers": n, "kind": "get", "changes": 0,
                        "ms": round(statistics.median(gets), 2), "ms_max": round(max(gets), 2),
                        "note": "GET of one subscriber (no change): the answer alone"})
            walls, lats, switched = [], [], 0
            for k in range(args.changes):
                sub = f"c{(k * 7919) % n}"
                st, r, dt = call(port, "PATCH", f"/api/v1/subscribers/{sub}",
                                 {"download_max": f"{20 + 10 * (k % 2)}mbit"})
                if st != 200:
                    sys.exit(f"PATCH {sub}: {st} {r}")
                switched += not r.get("in_place", False)
                walls.append(dt * 1e3)
                lats.append([x / 1e3 for x in lat_us(port)])
            out.append({"subscribers": n, "kind": "one", "changes": args.changes,
                        "ms": round(statistics.median(walls), 2),
                        "ms_max": round(max(walls), 2),
                        "in_force_ms": round(statistics.median(x[0] for x in lats), 3),
                        "in_force_max": round(max(x[0] for x in lats), 3),
                        "worker_ms": round(statistics.median(x[1] for x in lats), 3),
                        "note": f"{switched} switched" if switched else "in place"})
            write_files(d, n, args.nodes, 45)
            st, r, dt = call(port, "POST", "/api/v1/subscribers/reload")
            if st != 200:
                sys.exit(f"reload: {st} {r}")
            f, wk = lat_us(port)
            out.append({"subscribers": n, "kind": "batch", "changes": r["diff"]["rates"],
                        "ms": round(dt * 1e3, 1), "in_force_ms": round(f / 1e3, 3),
                        "worker_ms": round(wk / 1e3, 3),
                        "note": "in place" if r.get("in_place") else "switched"})
        finally:
            p.terminate()
            p.wait(timeout=60)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--counts", default="1000,10000,100000")
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--changes", type=int, default=50)
    ap.add_argument("--mem-mb", type=int, default=1024)
    ap.add_argument("--csv", default=str(REPO / "docs/results/subscribers/live_changes.csv"))
    args = ap.parse_args()
    weir = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build")) / "app" / "weir" / "weir"
    rows = []
    for n in (int(x) for x in args.counts.split(",")):
        rows += run_count(n, args, weir)
    keys = ["subscribers", "kind", "changes", "ms", "ms_max", "in_force_ms", "in_force_max",
            "worker_ms", "note"]
    Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in keys})
    print(f"{'SUBS':>7} {'KIND':6} {'CHANGES':>7} {'MS':>9} {'MS_MAX':>8} {'IN_FORCE':>9} "
          f"{'IF_MAX':>7} {'WORKER_MS':>9}  NOTE")
    for r in rows:
        print(f"{r['subscribers']:>7} {r['kind']:6} {r.get('changes', '')!s:>7} "
              f"{r.get('ms', '')!s:>9} {r.get('ms_max', '')!s:>8} {r.get('in_force_ms', '')!s:>9} "
              f"{r.get('in_force_max', '')!s:>7} {r.get('worker_ms', '')!s:>9}  {r.get('note', '')}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Does the REST API slow the worker down? (docs/rest.md)

Starts weir with traffic that needs no namespace and no NIC: the LAN port replays a pcap of
--flows distinct UDP flows forever (net_pcap infinite_rx, the frames held in memory), the
WAN port is net_null (what it receives is freed; its own rx returns no frames unless
--null-rx). The worker (lcore 1) forwards LAN to WAN as fast as it can and keeps every flow
in its table. Then, for --seconds each, it reads the worker's forwarded packets per second
from GET /api/v1/counters:

  idle     no API load (before and after the others: their mean is the reference)
  status   --clients threads (keep-alive http.client) hammering GET /api/v1/status
  flows    the same hammering GET /api/v1/flows?limit=1000 (the API's largest page; every
           request walks the whole table to count "total")

and prints requests/s per endpoint and forwarded packets/s with and without the load, both
per wall-clock second and per CPU second the worker thread got (/proc/PID/task/TID/stat):
on a machine shared with other busy work only the second isolates the API's effect.
Run as root from the repository (weir built in $WEIR_BUILD_DIR or ./build):

  nice -n 19 scripts/bench_rest.py [--clients 8] [--seconds 10] [--flows 10000]

The clients run on CPU 0 (--client-cpu), weir's management lcore, so that on a small
machine they take CPU time from the API they load and not from the worker on CPU 1.

Python standard library only (the pcap is written by hand).
"""
import argparse
import http.client
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from weirtb import weir_config_text  # noqa: E402


def ip_checksum(h):
    s = sum(struct.unpack("!10H", h))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def write_pcap(path, n):
    """n UDP frames of 64 bytes, each its own flow (10.x.y.z:1024+i -> 192.0.2.1:9)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i in range(n):
            payload = b"\0" * 18
            udp = struct.pack("!HHHH", 1024 + i % 60000, 9, 8 + len(payload), 0) + payload
            src = bytes([10, (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff])
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, src,
                             bytes([192, 0, 2, 1]))
            ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
            frame = (b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x08\x00" + ip + udp)
            f.write(struct.pack("<IIII", 0, i, len(frame), len(frame)) + frame)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    def __init__(self, port):
        self.port = port

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()


WORKER_TASK = None      # /proc/PID/task/TID/stat of weir's worker thread


def worker_cpu_s():
    """CPU seconds the worker thread has had: on a shared machine the wall-clock rate
    moves with what else runs on its CPU; packets per CPU second does not."""
    if WORKER_TASK is None:
        return None
    with open(WORKER_TASK) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def find_worker(pid):
    global WORKER_TASK
    for t in Path(f"/proc/{pid}/task").iterdir():
        if (t / "comm").read_text().strip().startswith("rte-worker"):
            WORKER_TASK = t / "stat"


def forwarded(api):
    s = api.get("/api/v1/counters")[1]
    return (time.monotonic(), s["ports"]["lan"]["forwarded"] + s["ports"]["wan"]["forwarded"],
            worker_cpu_s())


def hammer(port, path, clients, seconds):
    """clients threads, each on its own keep-alive connection: requests/s and errors."""
    stop = threading.Event()
    counts = [0] * clients
    errors = []
    lat = [0.0] * clients

    def run(k):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                c.request("GET", path)
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    errors.append(r.status)
            except (OSError, http.client.HTTPException) as e:
                errors.append(repr(e))
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            counts[k] += 1
            lat[k] += time.monotonic() - t0
        c.close()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    dt = time.monotonic() - t0
    n = sum(counts)
    return n / dt, (sum(lat) / n * 1e3 if n else None), errors


def phase(api, name, seconds, load=None):
    """Forwarded packets/s over `seconds`, with load (path, clients) running meanwhile."""
    result = {"phase": name}
    box = {}
    if load is not None:
        th = threading.Thread(target=lambda: box.update(
            zip(("rps", "latency_ms", "errors"), hammer(api.port, load[0], load[1], seconds))))
        th.start()
        time.sleep(0.2)                 # the clients connected
    t0, f0, w0 = forwarded(api)
    time.sleep(seconds - (0.4 if load else 0))
    t1, f1, w1 = forwarded(api)
    if load is not None:
        th.join()
        result.update(path=load[0], clients=load[1], requests_per_s=round(box["rps"], 1),
                      latency_ms=box["latency_ms"] and round(box["latency_ms"], 2),
                      errors=len(box["errors"]))
    result["forwarded_pps"] = round((f1 - f0) / (t1 - t0))
    if w1 is not None:
        result["worker_cpu"] = round((w1 - w0) / (t1 - t0), 3)
        result["pkts_per_cpu_s"] = round((f1 - f0) / (w1 - w0)) if w1 > w0 else None
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--flows", type=int, default=10000)
    ap.add_argument("--client-cpu", type=int, default=0, help="CPU the load clients run "
                    "on (default 0, weir's management lcore; -1: any)")
    ap.add_argument("--null-rx", action="store_true", help="the WAN port (net_null) also "
                    "receives synthetic 64-byte frames (not IP: forwarded, never a flow)")
    ap.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    args = ap.parse_args()
    build = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build"))
    weir = build / "app" / "weir" / "weir"
    with tempfile.TemporaryDirectory(prefix="bench_rest.") as d:
        d = Path(d)
        write_pcap(d / "flows.pcap", args.flows)
        port = free_port()
        cap = 1 << max(args.flows * 2 - 1, 1023).bit_length()
        null_args = "" if args.null_rx else ",no-rx=1"
        (d / "weir.cfg").write_text(weir_config_text(
            f"net_pcap0,rx_pcap={d / 'flows.pcap'},tx_pcap=/dev/null,infinite_rx=1",
            f"net_null0{null_args}", prefix=f"wbench-{os.getpid()}", mem_mb=1024, mbufs=65535,
            cache=256, body=f"flows = {{ capacity = {cap}; }};\nmanagement = {{ port = {port}; }};\n"))
        p = subprocess.Popen([str(weir), "--", "--config", str(d / "weir.cfg")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # The clients on the management lcore's CPU, not the worker's: there they
        # compete with the API (which is the point), not with the worker's polling.
        if args.client_cpu >= 0:
            os.sched_setaffinity(0, {args.client_cpu})
        api = Api(port)
        try:
            deadline = time.time() + 60
            while True:
                if p.poll() is not None:
                    sys.exit(f"weir exited: {p.stderr.read()}")
                try:
                    if api.get("/api/v1/status")[1]["flows"]["active"] >= args.flows:
                        break
                except OSError:
                    pass
                if time.time() > deadline:
                    sys.exit("the flows did not reach the table in 60 s")
                time.sleep(0.2)
            total = api.get("/api/v1/flows?limit=1")[1]["total"]
            find_worker(p.pid)
            time.sleep(1)
            results = [phase(api, "idle", args.seconds),
                       phase(api, "status", args.seconds, ("/api/v1/status", args.clients)),
                       phase(api, "flows", args.seconds,
                             ("/api/v1/flows?limit=1000", args.clients)),
                       phase(api, "idle", args.seconds)]
        finally:
            p.terminate()
            p.wait(timeout=30)
    # Idle before and after the loaded phases: their mean is the reference, their
    # difference what the machine's other load moved it meanwhile.
    idles = [r["forwarded_pps"] for r in results if r["phase"] == "idle"]
    idle = sum(idles) / len(idles)
    idles_cpu = [r.get("pkts_per_cpu_s") or 0 for r in results if r["phase"] == "idle"]
    idle_cpu = sum(idles_cpu) / len(idles_cpu)
    for r in results:
        r["vs_idle"] = round(r["forwarded_pps"] / idle, 4) if idle else None
        r["cpu_vs_idle"] = round(r["pkts_per_cpu_s"] / idle_cpu, 4) \
            if idle_cpu and r.get("pkts_per_cpu_s") else None
    out = {"flows_in_table": total, "cpus": os.cpu_count(), "idle_pps": round(idle),
           "idle_pkts_per_cpu_s": round(idle_cpu), "results": results}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{total} flows in the table, {os.cpu_count()} CPUs, {args.clients} clients, "
          f"{args.seconds:g} s per phase; VS_IDLE against the mean of the idle phases")
    print(f"{'PHASE':8} {'REQ/S':>9} {'LAT_MS':>8} {'ERR':>4} {'FWD_PPS':>12} {'VS_IDLE':>8} "
          f"{'W_CPU':>6} {'PKTS/CPU_S':>12} {'VS_IDLE':>8}")
    for r in results:
        print(f"{r['phase']:8} {r.get('requests_per_s', '-')!s:>9} "
              f"{r.get('latency_ms', '-')!s:>8} {r.get('errors', '-')!s:>4} "
              f"{r['forwarded_pps']:>12} {r['vs_idle']!s:>8} {r.get('worker_cpu')!s:>6} "
              f"{r.get('pkts_per_cpu_s')!s:>12} {r['cpu_vs_idle']!s:>8}")


if __name__ == "__main__":
    main()

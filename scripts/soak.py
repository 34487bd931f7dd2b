#!/usr/bin/python3
"""Long soak of weir in the namespace testbed (issue 16.9): does its memory stop growing
once the flow table has cycled through its capacity?

Traffic, all real Linux TCP/UDP through weir (shaped, PostACK, 2 LAN and 2 WAN hosts):
  - short TCP flows: Poisson arrivals (--rate per second, over both LAN hosts), sizes
    Pareto (shape --alpha, at least --min-bytes, capped at --max-bytes), half downloads
    and half uploads, to a random WAN host;
  - two long TCP flows (iperf3, paced at --long-rate, one each way) for the whole run;
  - every --burst-every s, a burst of 2 x capacity one-datagram UDP flows from distinct
    ports: the flow table fills (flow_full counts the rest), so every slot has been used
    and the table has cycled through its capacity within the run.
The flow table is small (--capacity per worker) and its timeouts short, so entries are
reclaimed and reused all the time.

Every --sample s: weir's RSS and peak RSS (/proc), flows active/inserted/expired/full,
mbufs in use, port counters, short flows done/failed -> OUT/soak.csv. At the end: the
counters must add up (by kind and by fate, lib/net/counters.h), weir must exit 0 (every mbuf
back), and OUT/soak.png (matplotlib) and OUT/summary.md say how RSS moved after the first
time the table was full.

Usage (as root):
  scripts/soak.py --duration 3600 --out docs/results/soak
  scripts/soak.py --quick --out /tmp/soak        # CI: 25 s, the same checks
Use your own testbed namespaces when others share the machine (WEIRTB_NS_PREFIX,
WEIRTB_STATE_DIR, docs/testbed.md). Exit status 0 when every check held.

The peer roles run inside the namespaces: soak.py server|client|udp-burst (internal).
"""
import argparse
import csv
import json
import os
import random
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

PORT = 5900
LONG_PORTS = (5910, 5911)
UDP_PORT = 5920
MAX_CONCURRENT = 48     # per client: beyond this an arrival is counted as skipped
HDR = struct.Struct("!cQ")  # b"D" download or b"U" upload, size


# ----- the peers (inside the namespaces) ---------------------------------------------
def _recv_exact(conn, n):
    got = 0
    while got < n:
        b = conn.recv(min(65536, n - got))
        if not b:
            raise ConnectionError(f"peer closed after {got} of {n} bytes")
        got += len(b)


def _send_n(conn, n):
    chunk = b"x" * 65536
    while n > 0:
        k = min(n, len(chunk))
        conn.sendall(chunk[:k])
        n -= k


def serve_one(conn):
    try:
        with conn:
            conn.settimeout(120)
            hdr = b""
            while len(hdr) < HDR.size:
                b = conn.recv(HDR.size - len(hdr))
                if not b:
                    return
                hdr += b
            op, n = HDR.unpack(hdr)
            if op == b"D":
                _send_n(conn, n)
            else:
                _recv_exact(conn, n)
                conn.sendall(b"K")
    except OSError:
        pass


def cmd_server(a):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", a.port))
    srv.listen(256)
    print("READY", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve_one, args=(conn,), daemon=True).start()


def cmd_client(a):
    """Poisson arrivals of Pareto-sized transfers until SIGTERM or --seconds."""
    rng = random.Random(a.seed)
    hosts = a.hosts.split(",")
    st = {"started": 0, "done": 0, "failed": 0, "skipped": 0, "bytes": 0}
    lock = threading.Lock()
    live = threading.BoundedSemaphore(MAX_CONCURRENT)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def one(host, op, n):
        ok = False
        try:
            with socket.create_connection((host, a.port), timeout=60) as s:
                s.settimeout(120)
                s.sendall(HDR.pack(op, n))
                if op == b"D":
                    _recv_exact(s, n)
                else:
                    _send_n(s, n)
                    _recv_exact(s, 1)
                ok = True
        except OSError:
            pass
        finally:
            live.release()
            with lock:
                st["done" if ok else "failed"] += 1
                st["bytes"] += n if ok else 0

    def write_status():
        with lock:
            text = json.dumps(st)
        tmp = a.status + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, a.status)

    end = time.monotonic() + a.seconds
    last = 0.0
    while not stop.is_set() and time.monotonic() < end:
        stop.wait(rng.expovariate(a.rate))
        if stop.is_set():
            break
        n = min(int(a.min_bytes * rng.paretovariate(a.alpha)), a.max_bytes)
        if not live.acquire(blocking=False):
            with lock:
                st["skipped"] += 1
        else:
            with lock:
                st["started"] += 1
            threading.Thread(target=one, daemon=True,
                             args=(rng.choice(hosts), rng.choice((b"D", b"U")), n)).start()
        if time.monotonic() - last >= 1.0:
            write_status()
            last = time.monotonic()
    # Let the transfers in flight finish (bounded), then the final count.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with lock:
            if st["done"] + st["failed"] == st["started"]:
                break
        time.sleep(0.2)
    write_status()
    print(json.dumps(st), flush=True)


def cmd_udp_burst(a):
    """One datagram from each of `count` fresh sockets (distinct source ports)."""
    for _ in range(a.count):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"soak", (a.host, a.port))
        s.close()
        time.sleep(a.gap)


# ----- the run ------------------------------------------------------------------------
def weir_config(path, capacity, rate):
    import weirtb
    body = (f'shaping = {{ outbound = "{rate}"; inbound = "{rate}"; }};\n')
    text = weirtb.testbed_config_text(body, stats_interval=0.5)
    old = "capacity = 65536;"
    assert old in text, old
    text = text.replace(old, f"capacity = {capacity};")
    # Short idle timeouts: entries are reclaimed (and their slots reused) within seconds.
    old = "tcp_syn = 30; tcp_established = 600; tcp_closing = 30; tcp_closed = 5; udp = 60; other = 30;"
    assert old in text, old
    text = text.replace(old, "tcp_syn = 10; tcp_established = 60; tcp_closing = 10; tcp_closed = 3; "
                             "udp = 5; other = 5;")
    path.write_text(text)
    return path


def rss_kb(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out.get("VmRSS", 0), out.get("VmHWM", 0)


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


FIELDS = ["t_s", "rss_kb", "hwm_kb", "flows_active", "flows_inserted", "flows_expired",
          "flows_full", "mbufs_in_use", "lan_rx", "lan_forwarded", "lan_dropped", "wan_rx",
          "wan_forwarded", "wan_dropped", "short_done", "short_failed", "short_skipped"]


def sample(tb, pid, t0, status_files):
    st = tb.weir_stats()
    rss, hwm = rss_kb(pid)
    cl = [read_json(f) for f in status_files]
    row = {"t_s": round(time.monotonic() - t0, 1), "rss_kb": rss, "hwm_kb": hwm,
           "flows_active": st["flows"]["active"], "flows_inserted": st["flows"]["inserted"],
           "flows_expired": st["flows"]["expired"], "flows_full": st["flows"]["full"],
           "mbufs_in_use": st["mbufs"]["in_use"]}
    for p in ("lan", "wan"):
        c = st["ports"][p]
        row[f"{p}_rx"], row[f"{p}_forwarded"], row[f"{p}_dropped"] = c["rx"], c["forwarded"], c["dropped"]
    for k in ("done", "failed", "skipped"):
        row[f"short_{k}"] = sum(c.get(k, 0) for c in cl)
    return row


def counters_add_up(tb, timeout=30):
    """(ok, detail) once nothing is queued: rx by kind and by fate (lib/net/counters.h)."""
    deadline = time.monotonic() + timeout
    while True:
        st = tb.weir_stats()
        busy = sum(st["shaping"][d]["queued_pkts"] for d in ("outbound", "inbound"))
        busy += (st.get("postack") or {}).get("acks_held", 0)
        bad = []
        for port in ("lan", "wan"):
            c = st["ports"][port]
            kinds = (c["managed"] + c["flow_full"] + c["non_ip"] + c["l2_control"]
                     + c["fragments"] + c["malformed"])
            fates = c["forwarded"] + c["tx_full"] + c["dropped"] + c["refused"] + c["malformed_dropped"]
            if kinds != c["rx"] or fates != c["rx"]:
                bad.append(f"{port}: rx {c['rx']} kinds {kinds} fates {fates}")
        if (busy == 0 and not bad) or time.monotonic() > deadline:
            return not bad and busy == 0, "; ".join(bad) or f"{busy} still queued/held"
        time.sleep(0.5)


def analyse(rows, capacity):
    """RSS when the table was first full, and how it moved after."""
    full = next((r for r in rows if r["flows_full"] > 0), None)
    last = rows[-1]
    res = {"samples": len(rows), "duration_s": last["t_s"], "capacity": capacity,
           "rss_start_kb": rows[0]["rss_kb"], "rss_end_kb": last["rss_kb"],
           "hwm_end_kb": last["hwm_kb"], "flows_inserted": last["flows_inserted"],
           "flows_full": last["flows_full"],
           "short_done": last["short_done"], "short_failed": last["short_failed"],
           "mbufs_in_use_max": max(r["mbufs_in_use"] for r in rows)}
    if full is not None:
        after = [r for r in rows if r["t_s"] >= full["t_s"]]
        res["first_full_s"] = full["t_s"]
        res["rss_at_first_full_kb"] = full["rss_kb"]
        res["rss_growth_after_full_kb"] = last["rss_kb"] - full["rss_kb"]
        res["rss_max_after_full_kb"] = max(r["rss_kb"] for r in after)
        res["flows_inserted_after_full"] = last["flows_inserted"] - full["flows_inserted"]
        # Growth over the second half of the run (the steady state).
        half = [r for r in rows if r["t_s"] >= last["t_s"] / 2]
        res["rss_growth_second_half_kb"] = half[-1]["rss_kb"] - half[0]["rss_kb"]
        res["flows_inserted_second_half"] = half[-1]["flows_inserted"] - half[0]["flows_inserted"]
    return res


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("soak: matplotlib missing (apt-get install python3-matplotlib): no PNG")
        return False
    t = [r["t_s"] / 60 for r in rows]
    fig, ax = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    ax[0].plot(t, [r["rss_kb"] / 1024 for r in rows], label="RSS")
    ax[0].plot(t, [r["hwm_kb"] / 1024 for r in rows], "--", label="peak RSS")
    ax[0].set_ylabel("weir MiB")
    ax[0].legend(loc="lower right")
    ax[1].plot(t, [r["flows_active"] for r in rows], label="flows active")
    ax[1].plot(t, [r["mbufs_in_use"] for r in rows], label="mbufs in use")
    ax[1].legend(loc="upper right")
    ax[2].plot(t, [r["flows_inserted"] for r in rows], label="flows inserted")
    ax[2].plot(t, [r["flows_full"] for r in rows], label="flow_full frames")
    ax[2].plot(t, [r["short_done"] for r in rows], label="short TCP flows done")
    ax[2].set_xlabel("minutes")
    ax[2].legend(loc="upper left")
    fig.suptitle("weir soak: memory while the flow table cycles")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return True


def summary_md(res, checks, args):
    lines = ["| measure | value |", "|---|---|"]
    for k, v in res.items():
        lines.append(f"| {k} | {v} |")
    lines.append("")
    for name, (ok, detail) in checks.items():
        lines.append(f"- {name}: {'OK' if ok else 'FAILED'} {detail}")
    lines.append("")
    lines.append(f"Command: `scripts/soak.py {' '.join(args)}`")
    return "\n".join(lines) + "\n"


def run(a):
    import weirtb
    from weirtb import PathSpec
    from weirtb.traffic import PYTHON

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = weir_config(out / "soak-weir.cfg", a.capacity, a.shape_rate)
    os.environ["WEIR_TESTBED_CFG"] = str(cfg)
    tb = weirtb.Testbed(lan=2, wan=2, paths=[PathSpec(delay=5), PathSpec(delay=10)])
    why = tb.check_prerequisites()
    if why:
        sys.exit("soak: testbed unavailable: " + "; ".join(why))
    me = str(Path(__file__).resolve())
    status_files = [str(weirtb.STATE_DIR / f"soak-client-{h}.json") for h in ("l1", "l2")]
    procs, rows, checks = [], [], {}
    with tb.claim().up():
        try:
            pid = tb._procs["weir"].pid
            for w in ("w1", "w2"):
                p = tb.popen(w, [PYTHON, me, "server", "--port", str(PORT)])
                if p.stdout.readline().strip() != "READY":
                    sys.exit(f"soak: server on {w} did not start: {p.stderr.read()}")
                procs.append(p)
            for port, (lan, wan, rev) in zip(LONG_PORTS, (("l1", "w1", False), ("l2", "w2", True))):
                procs.append(tb.popen(wan, ["iperf3", "-s", "-1", "-p", str(port)],
                                      stdout=subprocess_devnull(), stderr=subprocess_devnull()))
                time.sleep(0.3)
                procs.append(tb.popen(lan, ["iperf3", "-c", tb.addr(wan), "-p", str(port), "-t",
                                            str(int(a.duration) + 5), "-b", a.long_rate]
                                      + (["-R"] if rev else []),
                                      stdout=subprocess_devnull(), stderr=subprocess_devnull()))
            clients = []
            for i, (lan, sf) in enumerate(zip(("l1", "l2"), status_files)):
                clients.append(tb.popen(lan, [PYTHON, me, "client", "--hosts",
                                              f"{tb.addr('w1')},{tb.addr('w2')}", "--port", str(PORT),
                                              "--rate", str(a.rate / 2), "--seconds", str(a.duration),
                                              "--alpha", str(a.alpha), "--min-bytes", str(a.min_bytes),
                                              "--max-bytes", str(a.max_bytes), "--seed", str(i + 1),
                                              "--status", sf]))
            t0 = time.monotonic()
            next_burst = a.first_burst
            with open(out / "soak.csv", "w", newline="") as f:
                wr = csv.DictWriter(f, fieldnames=FIELDS)
                wr.writeheader()
                while time.monotonic() - t0 < a.duration:
                    el = time.monotonic() - t0
                    if el >= next_burst:
                        tb.popen("l1", [PYTHON, me, "udp-burst", "--host", tb.addr("w1"), "--port",
                                        str(UDP_PORT), "--count", str(2 * a.capacity)]).wait(60)
                        next_burst += a.burst_every
                    row = sample(tb, pid, t0, status_files)
                    rows.append(row)
                    wr.writerow(row)
                    f.flush()
                    time.sleep(max(0.0, a.sample - (time.monotonic() - t0 - el)))
            for c in clients:
                c.send_signal(signal.SIGTERM)
            for c in clients:
                try:
                    c.communicate(timeout=40)
                except Exception:
                    c.kill()
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.communicate()
            time.sleep(1)
            rows.append(sample(tb, pid, t0, status_files))
            with open(out / "soak.csv", "a", newline="") as f:
                csv.DictWriter(f, fieldnames=FIELDS).writerow(rows[-1])
            checks["counters add up"] = counters_add_up(tb)
            checks["still forwards"] = (tb.ping("l1", "w1", count=2).ok, "(ping l1 -> w1)")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            rc = tb.stop_gateway()
    checks["weir exit 0 (every mbuf back)"] = (rc == 0, f"(exit {rc})")
    done, failed = rows[-1]["short_done"], rows[-1]["short_failed"]
    checks["short flows completed"] = (done > 0 and failed <= max(2, done // 100),
                                       f"({done} done, {failed} failed)")
    res = analyse(rows, a.capacity)
    plot(rows, out / "soak.png")
    (out / "summary.json").write_text(json.dumps({"result": res, "checks": {
        k: {"ok": ok, "detail": d} for k, (ok, d) in checks.items()}}, indent=1))
    (out / "summary.md").write_text(summary_md(res, checks, sys.argv[1:]))
    print((out / "summary.md").read_text())
    return 0 if all(ok for ok, _ in checks.values()) else 1


def subprocess_devnull():
    import subprocess
    return subprocess.DEVNULL


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    s = sub.add_parser("server")
    s.add_argument("--port", type=int, default=PORT)
    c = sub.add_parser("client")
    c.add_argument("--hosts", required=True)
    c.add_argument("--port", type=int, default=PORT)
    c.add_argument("--rate", type=float, required=True)
    c.add_argument("--seconds", type=float, required=True)
    c.add_argument("--alpha", type=float, default=1.2)
    c.add_argument("--min-bytes", type=int, default=4000)
    c.add_argument("--max-bytes", type=int, default=4_000_000)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--status", required=True)
    u = sub.add_parser("udp-burst")
    u.add_argument("--host", required=True)
    u.add_argument("--port", type=int, default=UDP_PORT)
    u.add_argument("--count", type=int, required=True)
    u.add_argument("--gap", type=float, default=0.0005)
    # The run itself (no sub-command).
    ap.add_argument("--duration", type=float, default=3600, help="seconds of traffic")
    ap.add_argument("--rate", type=float, default=4.0, help="short TCP flows per second, in all")
    ap.add_argument("--alpha", type=float, default=1.2, help="Pareto shape of short flow sizes")
    ap.add_argument("--min-bytes", type=int, default=4000)
    ap.add_argument("--max-bytes", type=int, default=4_000_000)
    ap.add_argument("--long-rate", default="1M", help="iperf3 -b of each of the two long flows")
    ap.add_argument("--shape-rate", default="10mbit", help="weir's class rate each way")
    ap.add_argument("--capacity", type=int, default=512, help="flow-table capacity per worker")
    ap.add_argument("--first-burst", type=float, default=60, help="s until the first UDP burst")
    ap.add_argument("--burst-every", type=float, default=600, help="s between UDP bursts")
    ap.add_argument("--sample", type=float, default=5.0, help="s between samples")
    ap.add_argument("--quick", action="store_true", help="25 s, bursts at 5 and 15 s (CI)")
    ap.add_argument("--out", default="docs/results/soak")
    a = ap.parse_args(argv)
    if a.cmd == "server":
        return cmd_server(a)
    if a.cmd == "client":
        return cmd_client(a)
    if a.cmd == "udp-burst":
        return cmd_udp_burst(a)
    if os.geteuid() != 0:
        sys.exit("soak: run as root (network namespaces)")
    if a.quick:
        a.duration, a.first_burst, a.burst_every, a.sample = 25, 5, 10, 1.0
        a.capacity = 128
    return run(a)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Probes for a failover (run inside namespaces; every clock is CLOCK_MONOTONIC, which all
namespaces of one machine share, so a kill's time and a probe's times compare).

    failprobe.py udp-recv --port P --seconds S      READY, then one JSON line at the end
    failprobe.py udp-send --host A --port P --pps N --seconds S
    failprobe.py tcp-serve --port P --seconds S     READY, then JSON per connection
    failprobe.py tcp-hold --host A --port P --conns N --seconds S [--interval-ms 20]

udp-recv reports, for each datagram that arrived, its sequence number, when it was sent
and when it arrived (ns): failover_ms() turns that and a kill's time into the outage.
tcp-hold keeps N connections sending a small record every interval; tcp-serve reports per
connection the bytes received, the last arrival and whether it ended cleanly, so a caller
can count the connections that carried data after a failover.
"""
import argparse
import json
import select
import socket
import struct
import sys
import time

HDR = struct.Struct("!QQ")      # sequence number, send time (ns, CLOCK_MONOTONIC)


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def udp_recv(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", a.port))
    s.settimeout(0.2)
    print("READY", flush=True)
    seq, sent, arr = [], [], []
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        try:
            data = s.recv(2048)
        except socket.timeout:
            continue
        q, t = HDR.unpack_from(data)
        seq.append(q)
        sent.append(t)
        arr.append(now_ns())
    print(json.dumps({"seq": seq, "sent_ns": sent, "arr_ns": arr}), flush=True)


def udp_send(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = b"\0" * max(0, a.size - HDR.size)
    t0 = time.monotonic()
    n = int(a.pps * a.seconds)
    for q in range(n):
        delay = t0 + q / a.pps - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            s.sendto(HDR.pack(q, now_ns()) + pad, (a.host, a.port))
        except OSError:
            pass        # no route for a moment: lost
    print(json.dumps({"sent": n}), flush=True)


def failover_ms(res, kill_ns, pps):
    """From udp-recv's result and a kill's time (ns): the outage, as the time from the
    kill to the sending of the first datagram that came through after the longest run of
    datagrams lost around the kill (0.0 if none was), and how many that run lost. A loss at the very end (the receiver stopped first) is no outage:
    nothing came through after it."""
    got = dict(zip(res["seq"], res["sent_ns"]))
    if not got:
        return None, None
    qs = sorted(got)
    best = None
    # The run lost must end after the kill; it may begin with a datagram sent a little
    # before it (a sender descheduled on a loaded machine sends late and in bursts).
    for q1, q2 in zip(qs, qs[1:]):
        if q2 - q1 > 1 and got[q2] > kill_ns and got[q1] > kill_ns - 1e9 and \
                (best is None or q2 - q1 > best[1] - best[0]):
            best = (q1, q2)
    if best is None:
        return 0.0, 0
    return max(0.0, (got[best[1]] - kill_ns) / 1e6), best[1] - best[0] - 1


def tcp_serve(a):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", a.port))
    ls.listen(256)
    ls.setblocking(False)
    print("READY", flush=True)
    conns, info = {}, {}
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        r, _, _ = select.select([ls] + list(conns), [], [], 0.1)
        for s in r:
            if s is ls:
                c, peer = ls.accept()
                c.setblocking(False)
                conns[c] = f"{peer[0]}:{peer[1]}"
                info[conns[c]] = {"bytes": 0, "first_ns": now_ns(), "last_ns": None,
                                  "end": None}
                continue
            k = conns[s]
            try:
                d = s.recv(65536)
            except (ConnectionResetError, OSError) as e:
                info[k]["end"] = f"error: {e}"
                del conns[s]
                s.close()
                continue
            if not d:
                info[k]["end"] = "fin"
                del conns[s]
                s.close()
                continue
            info[k]["bytes"] += len(d)
            info[k]["last_ns"] = now_ns()
    print(json.dumps(info), flush=True)


def tcp_hold(a):
    socks = []
    for _ in range(a.conns):
        s = socket.create_connection((a.host, a.port), timeout=5)
        s.setblocking(False)
        socks.append(s)
    rec = b"x" * a.size
    errors, soft, t0 = {}, {}, time.monotonic()
    end = t0 + a.seconds
    k = 0
    while time.monotonic() < end:
        k += 1
        delay = t0 + k * a.interval_ms / 1000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        for i, s in enumerate(socks):
            if i in errors:
                continue
            try:
                s.send(rec)
            except BlockingIOError:
                pass    # the path is down and the buffer full: TCP resends
            except (ConnectionResetError, BrokenPipeError) as e:
                errors[i] = str(e)      # the connection is gone
            except OSError as e:
                # A soft error (no route for a moment, an ICMP unreachable) the kernel
                # reports once; the connection lives on and TCP resends.
                soft[str(e)] = soft.get(str(e), 0) + 1
    for s in socks:
        s.close()
    print(json.dumps({"conns": a.conns, "errors": errors, "soft_errors": soft}), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("udp-recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--seconds", type=float, required=True)
    s = sub.add_parser("udp-send")
    s.add_argument("--host", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--pps", type=float, default=1000)
    s.add_argument("--seconds", type=float, required=True)
    s.add_argument("--size", type=int, default=100)
    t = sub.add_parser("tcp-serve")
    t.add_argument("--port", type=int, required=True)
    t.add_argument("--seconds", type=float, required=True)
    h = sub.add_parser("tcp-hold")
    h.add_argument("--host", required=True)
    h.add_argument("--port", type=int, required=True)
    h.add_argument("--conns", type=int, default=8)
    h.add_argument("--seconds", type=float, required=True)
    h.add_argument("--interval-ms", type=float, default=20)
    h.add_argument("--size", type=int, default=200)
    a = ap.parse_args(argv)
    return {"udp-recv": udp_recv, "udp-send": udp_send, "tcp-serve": tcp_serve,
            "tcp-hold": tcp_hold}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())

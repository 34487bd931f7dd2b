#!/usr/bin/python3
"""A numbered UDP stream, to measure an outage in frames (run inside namespaces).

    seqstream.py recv --port P --seconds S     prints READY, then one JSON line at the end
    seqstream.py send --host A --port P --pps N --seconds S

The receiver reports how many datagrams arrived, how many sequence numbers never did
(lost), how many arrived more than once (duplicated), and the longest gap between two
arrivals (ms) - across a gateway restart, the outage.
"""
import argparse
import json
import socket
import struct
import sys
import time

HDR = struct.Struct("!Q")


def recv(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", a.port))
    s.settimeout(0.2)
    print("READY", flush=True)
    seen, dup, gap, last, n, top = set(), 0, 0.0, None, 0, -1
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        try:
            data = s.recv(2048)
        except socket.timeout:
            continue
        now = time.monotonic()
        seq = HDR.unpack_from(data)[0]
        n += 1
        if seq in seen:
            dup += 1
        seen.add(seq)
        top = max(top, seq)
        if last is not None:
            gap = max(gap, now - last)
        last = now
    lost = (top + 1 - len(seen)) if top >= 0 else 0
    print(json.dumps({"received": n, "unique": len(seen), "lost": lost, "duplicated": dup,
                      "max_gap_ms": round(gap * 1000, 1), "highest": top}), flush=True)


def send(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = b"\0" * max(0, a.size - HDR.size)
    t0 = time.monotonic()
    for seq in range(int(a.pps * a.seconds)):
        # Absolute schedule: a late wake-up sends the backlog, the rate holds.
        delay = t0 + seq / a.pps - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            s.sendto(HDR.pack(seq) + pad, (a.host, a.port))
        except OSError:
            pass        # no route or neighbour for a moment: that datagram is lost
    print(json.dumps({"sent": int(a.pps * a.seconds)}), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--seconds", type=float, required=True)
    s = sub.add_parser("send")
    s.add_argument("--host", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--pps", type=float, default=1000)
    s.add_argument("--seconds", type=float, required=True)
    s.add_argument("--size", type=int, default=100)
    a = ap.parse_args(argv)
    return recv(a) if a.cmd == "recv" else send(a)


if __name__ == "__main__":
    sys.exit(main())

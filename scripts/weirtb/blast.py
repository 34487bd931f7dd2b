#!/usr/bin/python3
"""A constant-rate UDP blast without a control connection, run inside a namespace.

    blast.py recv --port P --seconds T      prints READY, then one JSON line:
                                            {"bytes_per_s": [...], "pkts": N}
    blast.py send --host ADDR --port P --flows K --rate BPS --size PAYLOAD --seconds T

The sender paces K flows (K sockets, so K source ports) round robin at BPS bits/s of
payload in total. iperf3's UDP mode needs a TCP control connection, which the very
flood it measures can starve in a shared FIFO (then the run has no report, or no
blast); this one only sends. The receiver counts payload bytes per second from its
first datagram.
"""
import argparse
import json
import socket
import sys
import time


def recv(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", args.port))
    s.settimeout(0.5)
    print("READY", flush=True)
    per_s, pkts, t0 = [], 0, None
    deadline = time.monotonic() + args.seconds + args.wait
    while time.monotonic() < deadline:
        try:
            n = len(s.recv(65536))
        except socket.timeout:
            continue
        now = time.monotonic()
        if t0 is None:
            t0 = now
            deadline = t0 + args.seconds + 1
        i = int(now - t0)
        while len(per_s) <= i:
            per_s.append(0)
        per_s[i] += n
        pkts += 1
    print(json.dumps({"bytes_per_s": per_s, "pkts": pkts}), flush=True)


def send(args):
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(args.flows)]
    payload = bytes(args.size)
    gap = args.size * 8 / args.rate          # seconds between two datagrams (all flows)
    t0 = time.monotonic()
    end, k, sent = t0 + args.seconds, 0, 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = t0 + sent * gap
        if due > now:
            time.sleep(min(due - now, 0.002))
            continue
        try:
            socks[k].sendto(payload, (args.host, args.port))
        except OSError:
            pass                              # a full socket buffer: the datagram is lost
        k = (k + 1) % args.flows
        sent += 1
    print(json.dumps({"sent": sent}), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--seconds", type=float, required=True)
    r.add_argument("--wait", type=float, default=60, help="how long to wait for the first datagram")
    s = sub.add_parser("send")
    s.add_argument("--host", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--flows", type=int, default=1)
    s.add_argument("--rate", type=float, required=True)
    s.add_argument("--size", type=int, required=True)
    s.add_argument("--seconds", type=float, required=True)
    args = ap.parse_args(argv)
    (recv if args.mode == "recv" else send)(args)


if __name__ == "__main__":
    sys.exit(main())

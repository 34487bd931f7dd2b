#!/usr/bin/python3
"""Byte-exact TCP bulk transfer, run inside a namespace by traffic.bulk_transfer.

    bulk.py recv --port P [--bind ADDR]      prints READY, then one JSON line
    bulk.py send --host ADDR --port P --bytes N

The sender streams N random bytes and half-closes; the receiver hashes what it
got, answers with its sha256 and both print {"bytes", "sha256"}. A gateway that
drops, duplicates, reorders-without-repair or corrupts a byte shows up as a
digest mismatch, which iperf3 (it counts bytes only) cannot see.
"""

import argparse
import hashlib
import json
import os
import socket
import sys
import time

CHUNK = 64 * 1024


def recv(args):
    fam = socket.AF_INET6 if ":" in args.bind else socket.AF_INET
    srv = socket.socket(fam, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((args.bind, args.port))
    srv.listen(1)
    srv.settimeout(args.timeout)
    print("READY", flush=True)
    conn, peer = srv.accept()
    conn.settimeout(args.timeout)
    h, n, t0 = hashlib.sha256(), 0, time.monotonic()
    if args.pause:
        time.sleep(args.pause)  # a receiver that stops reading: its window closes
    while True:
        buf = conn.recv(CHUNK)
        if not buf:
            break
        h.update(buf)
        n += len(buf)
    secs = time.monotonic() - t0
    digest = h.hexdigest()
    conn.sendall(digest.encode())
    conn.close()
    print(json.dumps({"bytes": n, "sha256": digest, "seconds": secs, "peer": peer[0]}), flush=True)


def send(args):
    s = socket.create_connection((args.host, args.port), timeout=args.timeout)
    h, left, t0 = hashlib.sha256(), args.bytes, time.monotonic()
    while left > 0:
        buf = os.urandom(min(CHUNK, left))
        h.update(buf)
        s.sendall(buf)
        left -= len(buf)
    s.shutdown(socket.SHUT_WR)
    # The receiver answers only after it has seen EOF, so this also waits
    # until every byte has arrived.
    peer = b""
    while len(peer) < 64:
        b = s.recv(64 - len(peer))
        if not b:
            break
        peer += b
    secs = time.monotonic() - t0
    s.close()
    print(json.dumps({"bytes": args.bytes, "sha256": h.hexdigest(), "seconds": secs,
                      "peer_sha256": peer.decode(errors="replace")}), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--bind", default="0.0.0.0")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--timeout", type=float, default=60)
    r.add_argument("--pause", type=float, default=0, help="seconds to wait before reading")
    s = sub.add_parser("send")
    s.add_argument("--host", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--bytes", type=int, required=True)
    s.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args(argv)
    (recv if args.mode == "recv" else send)(args)


if __name__ == "__main__":
    sys.exit(main())

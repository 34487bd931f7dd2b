#!/usr/bin/python3
"""Datagram and raw-frame probes, run inside a namespace by traffic.py.

    probe.py udp-recv --port P [--bind A] [--timeout S]      READY, then {"count", "bytes"}
    probe.py udp-send --host A --port P --count N [--size B]
    probe.py vlan-sniff --iface eth0 --vid 100 --token T     READY, then {"count"}
    probe.py vlan-send  --iface eth0 --vid 100 --token T --dst MAC --count N

The VLAN probes build 802.1Q frames with scapy, so tagged traffic can be
tested on kernels without the 8021q driver (no eth0.100 possible there). The
receiver counts only frames that carry the right VID *and* the token, so
stray traffic cannot make a test pass.
"""

import argparse
import json
import socket
import sys
import time


def udp_recv(a):
    fam = socket.AF_INET6 if ":" in a.bind else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((a.bind, a.port))
    print("READY", flush=True)
    count = nbytes = 0
    s.settimeout(a.timeout)          # wait long for the first datagram ...
    try:
        while True:
            data = s.recv(65535)
            count += 1
            nbytes += len(data)
            s.settimeout(a.idle)     # ... then stop once the burst has passed
    except socket.timeout:
        pass
    print(json.dumps({"count": count, "bytes": nbytes}), flush=True)


def udp_send(a):
    fam = socket.AF_INET6 if ":" in a.host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    payload = b"w" * a.size
    for _ in range(a.count):
        s.sendto(payload, (a.host, a.port))
        time.sleep(a.gap)            # pace it: we test forwarding, not queue overflow
    print(json.dumps({"count": a.count}), flush=True)


def vlan_sniff(a):
    from scapy.all import AsyncSniffer, Dot1Q, Raw
    tok = a.token.encode()

    def match(p):
        return Dot1Q in p and p[Dot1Q].vlan == a.vid and Raw in p and tok in bytes(p[Raw])

    seen = []                        # AsyncSniffer.results is only filled at stop()
    sn = AsyncSniffer(iface=a.iface, lfilter=match, prn=seen.append, store=False,
                      timeout=a.timeout)
    sn.start()
    while not getattr(sn, "running", False):
        time.sleep(0.01)
    time.sleep(0.2)                  # running is set just before the socket is read
    print("READY", flush=True)
    deadline = time.monotonic() + a.timeout
    while time.monotonic() < deadline and len(seen) < a.count:
        time.sleep(0.05)
    time.sleep(0.2)                  # let duplicates, if any, arrive and be counted
    if sn.running:
        sn.stop()
    print(json.dumps({"count": len(seen)}), flush=True)


def vlan_send(a):
    from scapy.all import Ether, Dot1Q, IP, UDP, Raw, sendp, get_if_hwaddr
    frames = [Ether(src=get_if_hwaddr(a.iface), dst=a.dst) / Dot1Q(vlan=a.vid) /
              IP(src="10.78.0.1", dst="10.78.0.2") / UDP(sport=40000, dport=40000) /
              Raw(f"{a.token}-{i}".encode()) for i in range(a.count)]
    sendp(frames, iface=a.iface, inter=0.01, verbose=False)
    print(json.dumps({"count": a.count}), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("udp-recv")
    p.add_argument("--bind", default="0.0.0.0")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--timeout", type=float, default=10)
    p.add_argument("--idle", type=float, default=1.0)
    p = sub.add_parser("udp-send")
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--gap", type=float, default=0.002)
    for name in ("vlan-sniff", "vlan-send"):
        p = sub.add_parser(name)
        p.add_argument("--iface", default="eth0")
        p.add_argument("--vid", type=int, default=100)
        p.add_argument("--token", required=True)
        p.add_argument("--count", type=int, default=10)
        if name == "vlan-sniff":
            p.add_argument("--timeout", type=float, default=10)
        else:
            p.add_argument("--dst", required=True)
    a = ap.parse_args(argv)
    {"udp-recv": udp_recv, "udp-send": udp_send, "vlan-sniff": vlan_sniff,
     "vlan-send": vlan_send}[a.mode](a)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Write a pcap of good and malformed frames, and the counts weir must report for it.

Usage: gen_malformed.py OUT.pcap OUT.json

Every frame is labelled with what the parser must make of it: a malformed reason
(weir_malformed_name), "fragment", "non_ip" or "managed". The mix is deterministic
so the test can compare weir's counters with the labels exactly.
"""
import json
import struct
import sys

from scapy.all import (ARP, ICMP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether, ICMPv6EchoRequest,
                       IPv6, IPv6ExtHdrFragment, IPv6ExtHdrRouting, Raw, wrpcap)

MAC = dict(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
SYN_OPTS = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None), ("WScale", 7)]


def tcp4(**kw):
    return Ether(**MAC) / IP(src="10.1.0.1", dst="10.2.0.1") / TCP(sport=40000, dport=80, **kw)


def patch(frame, offset, data):
    b = bytearray(bytes(frame))
    b[offset:offset + len(data)] = data
    return bytes(b)


def frames():
    good_tcp = tcp4(flags="S", options=SYN_OPTS)
    yield "managed", bytes(good_tcp)
    yield "managed", bytes(tcp4(flags="A", options=[("NOP", None), ("NOP", None), ("SAck", (1, 2))]) / Raw(b"d" * 100))
    yield "managed", bytes(Ether(**MAC) / IP(src="10.1.0.1", dst="10.2.0.1") / UDP(sport=5000, dport=53) / Raw(b"q" * 30))
    yield "managed", bytes(Ether(**MAC) / IPv6(src="fd77::1", dst="fd77::2") / TCP(sport=1, dport=2, flags="PA") / Raw(b"v6"))
    yield "managed", bytes(Ether(**MAC) / Dot1Q(vlan=100) / IP() / ICMP(id=9))
    yield "managed", bytes(Ether(**MAC) / Dot1AD(vlan=10) / Dot1Q(vlan=20) / IPv6() / ICMPv6EchoRequest(id=3))
    yield "non_ip", bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=MAC["src"]) / ARP(pdst="10.2.0.1"))
    yield "non_ip", bytes(Ether(**MAC, type=0x88cc) / Raw(b"\x02\x07\x04" + b"\x00" * 40))  # LLDP-like
    yield "fragment", bytes(Ether(**MAC) / IP(flags="MF", frag=0) / UDP() / Raw(b"f" * 40))
    yield "fragment", bytes(Ether(**MAC) / IP(frag=100) / Raw(b"g" * 40))
    yield "fragment", bytes(Ether(**MAC) / IPv6() / IPv6ExtHdrFragment(m=1, offset=0) / UDP() / Raw(b"h" * 16))

    base = bytes(good_tcp)          # 14 Ethernet + 20 IP + 40 TCP (20 header + 20 options)
    yield "trunc_l2", base[:10]
    yield "trunc_l2", bytes(Ether(**MAC, type=0x8100))[:14] + b"\x00"   # tag cut short
    yield "trunc_l3", base[:14 + 12]
    yield "ip_version", patch(base, 14, b"\x65")
    yield "ip_ihl", patch(base, 14, b"\x43")
    yield "ip_len", patch(base, 16, struct.pack("!H", len(base) - 14 + 50))
    yield "ip_opt", bytes(Ether(**MAC) / IP(options=b"\x07\x09\x04\x00") / UDP())
    yield "ip6_ext", bytes(Ether(**MAC) / IPv6() / IPv6ExtHdrRouting(len=6) / Raw(b"\x00" * 8))
    yield "trunc_l4", patch(base, 16, struct.pack("!H", 20 + 10))
    yield "tcp_doff", patch(base, 14 + 20 + 12, b"\x30")
    yield "tcp_opt", patch(base, 14 + 20 + 21, b"\x00")     # MSS option length 0
    yield "udp_len", bytes(Ether(**MAC) / IP() / UDP(len=200) / Raw(b"u" * 8))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    labelled = list(frames()) * 3   # a few of each, so counts are not all 1
    counts = {}
    for label, _ in labelled:
        counts[label] = counts.get(label, 0) + 1
    wrpcap(sys.argv[1], [Raw(f) for _, f in labelled], linktype=1)
    expect = {
        "total": len(labelled),
        "managed": counts.pop("managed", 0),
        "non_ip": counts.pop("non_ip", 0),
        "fragments": counts.pop("fragment", 0),
        "malformed": counts,
    }
    with open(sys.argv[2], "w") as f:
        json.dump(expect, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

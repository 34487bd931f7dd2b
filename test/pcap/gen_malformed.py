#!/usr/bin/python3
"""Write a deterministic pcap of good, fragmented and malformed frames, and a
JSON file saying how weir's parser must classify them.

Usage: /usr/bin/python3 test/pcap/gen_malformed.py OUT.pcap OUT.json
       /usr/bin/python3 test/pcap/gen_malformed.py --check PARSE_PCAP
         (generate into a temporary directory, run build's test/unit/parse_pcap
          on the pcap and fail unless its counts equal the labels)

Each frame is built with a label (managed, ipsec (managed too), non_ip, l2_control, fragment or a malformed
reason named as lib/net/parse.c's weir_malformed_name() names it), so the JSON is
what the generator *intends*; test/unit/parse_pcap.c prints what the parser
*finds*, and tests compare the two. The same bytes come out on every run
(fixed addresses, ids, timestamps and shuffle seed) so a failure reproduces.
"""

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from scapy.layers.inet import ICMP, IP, TCP, UDP, fragment
from scapy.layers.inet6 import (ICMPv6EchoRequest, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                                IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, fragment6)
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether
from scapy.layers.ipsec import AH, ESP
from scapy.packet import Raw
from scapy.utils import RawPcapWriter

# In enum weir_malformed order (lib/net/parse.h); the JSON always carries every one.
REASONS = ["trunc_l2", "trunc_l3", "ip_version", "ip_ihl", "ip_len", "ip_opt", "ip6_ext",
           "trunc_l4", "tcp_doff", "tcp_opt", "udp_len", "ipsec_short", "ipsec_spi0"]
ROUNDS = 3      # every frame appears this often, shuffled, so order bugs show
SEED = 20221122

LAN_MAC, WAN_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
A4, B4 = "10.0.0.1", "192.168.1.2"
A6, B6 = "fd77::1", "fd77::2"
SYN_OPTS = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None), ("WScale", 7)]


def eth(*tags):
    e = Ether(src=LAN_MAC, dst=WAN_MAC)
    for i, vid in enumerate(tags):
        e = e / (Dot1AD(vlan=vid) if i == 0 and len(tags) > 1 else Dot1Q(vlan=vid))
    return e


def v4(**kw):
    return IP(src=A4, dst=B4, id=0x1234, **kw)


def v6(**kw):
    return IPv6(src=A6, dst=B6, **kw)


def good():
    """Frames the parser must accept: managed (keyed to a flow) or non-IP."""
    m = [
        eth() / v4(flags="DF") / TCP(sport=40000, dport=443, flags="S", seq=1000, options=SYN_OPTS),
        eth() / v4() / TCP(sport=40000, dport=443, flags="A", seq=1001, ack=5001,
                           options=[("NOP", None), ("NOP", None), ("SAck", (100, 200, 300, 400))]),
        eth() / v4() / TCP(sport=40000, dport=443, flags="PA", seq=1001, ack=5001) / Raw(b"x" * 1000),
        eth() / v4() / UDP(sport=5353, dport=53) / Raw(b"query"),
        eth() / v4(options=[b"\x07\x07\x04\x00\x00\x00\x00\x00"]) / UDP(sport=1, dport=2) / Raw(b"rr"),
        eth() / v4() / ICMP(type=8, id=0x4242, seq=1) / Raw(b"ping"),
        eth() / v4(proto=47) / Raw(b"\x00\x00\x08\x00"),                       # GRE: zero ports
        eth() / v6() / TCP(sport=40001, dport=80, flags="S", options=SYN_OPTS),
        eth() / v6() / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() / UDP(sport=7, dport=9) / Raw(b"v6"),
        eth() / v6() / ICMPv6EchoRequest(id=0x4343, seq=1),
        eth() / v6() / IPv6ExtHdrFragment(offset=0, m=0, id=99) / UDP(sport=1, dport=2),  # atomic
        eth(100) / v4() / TCP(sport=40002, dport=22, flags="A"),
        eth(100, 200) / v4() / UDP(sport=4000, dport=4001) / Raw(b"qinq"),
        eth(300, 400) / v6() / TCP(sport=40003, dport=443, flags="A"),
        # UDP 4500 that is not ESP: IKE (zero non-ESP marker), the NAT keepalive, and a
        # payload too short to be ESP, all UDP for the receiver's IKE socket.
        eth() / v4() / UDP(sport=4500, dport=4500) / Raw(bytes(4) + b"ike-header"),
        eth() / v4() / UDP(sport=61000, dport=4500) / Raw(b"\xff"),
        eth() / v4() / UDP(sport=4500, dport=4500) / Raw(b"\x00\x00\x10\x01\x00"),
    ]
    frames = [(bytes(p), "managed") for p in m]
    frames += [(bytes(p), "ipsec") for p in ipsec_good()]
    # A short IP packet in a frame padded to Ethernet's 60-byte minimum.
    short = bytes(eth() / v4() / UDP(sport=1, dport=2))
    frames.append((short + bytes(60 - len(short)), "managed"))
    frames += [
        (bytes(eth() / ARP(hwsrc=LAN_MAC, psrc=A4, pdst=B4)), "l2_control"),
        (bytes(eth(100) / ARP(op=2, hwsrc=WAN_MAC, psrc=B4, pdst=A4)), "l2_control"),
        (bytes(Ether(src=LAN_MAC, dst="01:80:c2:00:00:0e", type=0x88cc) / Raw(bytes(46))), "l2_control"),
        # IEEE 802 local experimental ethertype: not IP, not L2 control.
        (bytes(Ether(src=LAN_MAC, dst=WAN_MAC, type=0x88b5) / Raw(bytes(46))), "non_ip"),
    ]
    return frames


def esp_body(n):
    """Opaque ESP payload (IV, ciphertext, ICV): weir never reads it."""
    return Raw(bytes((i * 37) & 0xff for i in range(n)))


def ipsec_good():
    """ESP/AH SAs (managed flows keyed by SPI, counted "ipsec"), including
    sequence numbers that wrap and jump back: an SA's business, not malformed."""
    natt = UDP(sport=4500, dport=4500)
    return [
        eth() / v4(proto=50) / ESP(spi=0x1001, seq=1) / esp_body(64),
        eth() / v4(proto=50) / ESP(spi=0x1001, seq=0xffffffff) / esp_body(64),   # wraps next
        eth() / v4(proto=50) / ESP(spi=0x1001, seq=0) / esp_body(64),            # wrapped
        eth() / v4(proto=50) / ESP(spi=0x1001, seq=0x10) / esp_body(64),         # jumps back
        eth() / v6() / ESP(spi=0x2002, seq=7) / esp_body(48),
        eth() / v4() / AH(spi=0x3003, seq=3, nh=6, icv=bytes(12), payloadlen=4) / TCP(sport=1, dport=2, flags="A"),
        eth() / v6() / AH(spi=0x4004, seq=4, nh=6, icv=bytes(12), payloadlen=4) / TCP(sport=1, dport=2, flags="A"),
        eth() / v4() / natt / ESP(spi=0x5005, seq=5) / esp_body(32),
    ]


def fragments():
    big4 = eth() / v4() / UDP(sport=6000, dport=6001) / Raw(bytes(range(256)) * 12)
    big6 = eth() / v6() / IPv6ExtHdrFragment(id=7) / UDP(sport=6000, dport=6001) / Raw(bytes(3000))
    out = [bytes(eth() / f) for f in fragment(big4[IP], fragsize=1000)]
    out += [bytes(eth() / f) for f in fragment6(big6[IPv6], 1280)]
    assert len(out) >= 6
    return [(b, "fragment") for b in out]


def patch(frame, off, value):
    b = bytearray(frame)
    b[off:off + len(value)] = value
    return bytes(b)


def malformed():
    tcp4 = bytes(eth() / v4() / TCP(sport=1, dport=2, flags="S", options=SYN_OPTS))
    udp4 = bytes(eth() / v4() / UDP(sport=1, dport=2) / Raw(b"abcd"))
    tcp6 = bytes(eth() / v6() / TCP(sport=1, dport=2, flags="A"))
    bad = {
        "trunc_l2": [tcp4[:10], tcp4[:12] + b"\x81\x00\x00"],          # runt; VLAN tag cut
        "trunc_l3": [tcp4[:14 + 19], tcp6[:14 + 39]],
        "ip_version": [patch(tcp4, 14, b"\x65"), patch(tcp6, 14, b"\x45")],
        "ip_ihl": [patch(tcp4, 14, b"\x44"),
                   bytes(eth() / v4(ihl=15) / Raw(bytes(20)))],          # options past the frame
        "ip_len": [bytes(eth() / v4(len=500) / UDP(sport=1, dport=2)),
                   bytes(eth() / v4(len=19) / UDP(sport=1, dport=2)),
                   bytes(eth() / v6(plen=0) / UDP(sport=1, dport=2))],   # jumbogram on Ethernet
        "ip_opt": [bytes(eth() / v4(options=[b"\x07\x09\x04\x00"]) / UDP(sport=1, dport=2))],
        "ip6_ext": [bytes(eth() / v6(nh=43, plen=16) / Raw(b"\x06\x04" + bytes(14))),
                    bytes(eth() / v6(nh=0, plen=4) / Raw(bytes(4)))],
        "trunc_l4": [bytes(eth() / v4(proto=6) / Raw(bytes(10))),
                     bytes(eth() / v6(nh=17) / Raw(bytes(4)))],
        "tcp_doff": [patch(tcp4, 14 + 20 + 12, b"\x40"), patch(tcp6, 14 + 40 + 12, b"\xf0")],
        "tcp_opt": [patch(tcp4, 14 + 20 + 20 + 1, b"\x03"),                # MSS length 3
                    patch(tcp4, 14 + 20 + 20 + 1, b"\x28")],               # runs past header
        "udp_len": [patch(udp4, 14 + 20 + 4, b"\x00\xc8"), patch(udp4, 14 + 20 + 4, b"\x00\x04")],
        "ipsec_short": [bytes(eth() / v4(proto=50) / Raw(b"\x00\x00\x10\x01\x00")),   # ESP cut
                        bytes(eth() / v6(nh=51) / Raw(b"\x3b\x00" + bytes(2) + b"\x00\x00\x10\x01"
                                                      + bytes(4)))],          # AH length 0
        "ipsec_spi0": [bytes(eth() / v4(proto=50) / ESP(spi=0, seq=1) / esp_body(16)),
                       bytes(eth() / v6() / AH(spi=0, seq=1, nh=59, icv=bytes(12), payloadlen=4))],
    }
    assert set(bad) == set(REASONS)
    return [(b, why) for why, frames in bad.items() for b in frames]


def write(pcap_path, json_path):
    frames = (good() + fragments() + malformed()) * ROUNDS
    random.Random(SEED).shuffle(frames)
    want = {"total": len(frames), "malformed": {r: 0 for r in REASONS},
            "fragments": 0, "non_ip": 0, "l2_control": 0, "managed": 0, "ipsec": 0}
    w = RawPcapWriter(str(pcap_path), linktype=1)     # 1 = Ethernet
    w.write_header(None)    # write_packet() alone would leave the file headerless
    for i, (frame, label) in enumerate(frames):
        # Fixed timestamps: the file is byte-identical on every run.
        w.write_packet(frame, sec=1700000000 + i // 1000, usec=(i % 1000) * 1000)
        if label in REASONS:
            want["malformed"][label] += 1
        elif label == "ipsec":
            want["managed"] += 1
            want["ipsec"] += 1
        else:
            want[{"fragment": "fragments"}.get(label, label)] += 1
    w.close()
    with open(json_path, "w") as f:
        json.dump(want, f, indent=1, sort_keys=True)
        f.write("\n")
    return want


def check(parse_pcap):
    """Exit status 0 when the real parser's counts equal the labels."""
    with tempfile.TemporaryDirectory() as d:
        want = write(Path(d) / "m.pcap", Path(d) / "m.json")
        out = subprocess.run([parse_pcap, str(Path(d) / "m.pcap")], check=True,
                             capture_output=True, text=True).stdout
    got = json.loads(out)
    if got != want:
        print("labels: " + json.dumps(want, sort_keys=True))
        print("parser: " + json.dumps(got, sort_keys=True))
        return 1
    print(f"parser agrees with the labels of {want['total']} frames")
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2]))
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    write(sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    main()

-- malformed.lua: runt, bad-length and bad-option frames mixed into good traffic, LAN -> WAN,
-- replayed from a pcap the project generates (run pktgen-scripts/make-pcaps first).
-- pktgen-args: -s 0:malformed.pcap
--
-- Loads: TX_PORT (weir's LAN port) replays PCAP_DIR/malformed.pcap in a loop at RATE_PCT %
-- of the link: 16 frames a pass, good and bad alternating (the pktgen-args line above
-- loads it on Pktgen port 0: change it with TX_PORT). RX_PORT only receives. The frame
-- sizes are the file's (60 to 1514 bytes): PKT_SIZE and FLOWS do not apply.
--
-- What weir must count, by lib/net/parse.c's rule: a frame that fails a bounds or length check
-- gets one malformed reason, parsing stops there, and the frame is bridged unmanaged:
-- counted in ports.lan.malformed_by.<reason> and ports.lan.malformed, then forwarded
-- unchanged like any other frame (never dropped for being malformed). Per pass of 16:
--   8  good (UDP, TCP with options, TCP SYN, ICMP echo; 8 flows)    -> ports.lan.managed
--   1  IPv6 header cut short behind two VLAN tags (a 60-byte runt)  -> malformed_by.trunc_l3
--   1  IPv4 packet of 30 bytes: 10 bytes of TCP (60-byte runt)      -> malformed_by.trunc_l4
--   1  IPv4 header length (IHL) 4, i.e. 16 bytes                     -> malformed_by.ip_ihl
--   2  IPv4 total length 1000 (beyond the frame) and 16 (below IHL)  -> malformed_by.ip_len
--   1  TCP data offset 4, i.e. 16 bytes                             -> malformed_by.tcp_doff
--   2  TCP option lengths: MSS length 3, SACK length 12              -> malformed_by.tcp_opt
-- expect: managed 8/16
-- expect: malformed_by.trunc_l3 1/16
-- expect: malformed_by.trunc_l4 1/16
-- expect: malformed_by.ip_ihl 1/16
-- expect: malformed_by.ip_len 2/16
-- expect: malformed_by.tcp_doff 1/16
-- expect: malformed_by.tcp_opt 2/16
-- so, with R = ports.lan.rx: ports.lan.managed = R/2, ports.lan.malformed = R/2, each
-- malformed_by.<reason> its share of R above (to within one pass, 16 frames, if the stats
-- were written mid-pass), all other malformed_by.* = 0, ports.lan.forwarded = R and
-- ports.wan.tx = R (unless ports.lan.tx_full counts frames weir could not send),
-- flows.inserted = 8, and weir keeps running.
-- Pktgen cannot send a true runt: it pads any pcap frame shorter than 60 bytes (without
-- FCS) to 60 with stale buffer bytes, so make-pcaps writes none; the "runts" here are
-- 60-byte frames whose IP packet is cut short (trunc_l3, trunc_l4). Frames under 14
-- bytes (trunc_l2) only the in-memory pcap replay can test (test/py/test_pcap_replay.py).
RATE_PCT = RATE_PCT or 100
PKT_SIZE = PKT_SIZE or 64           -- unused: the pcap's frames keep their sizes
FLOWS = FLOWS or 8                  -- unused: the pcap holds 8 flows
DURATION = DURATION or 10
TX_PORT = TX_PORT or 0
RX_PORT = RX_PORT or 1
PCAP_DIR = PCAP_DIR or "pktgen-scripts/pcap"

local tx = tostring(TX_PORT)

-- pcap mode first: turning it on resets the port's pacing (no rate limit at all), and the
-- rate is computed from the pcap's average frame only then.
pktgen.pcap(tx, "on")
pktgen.set(tx, "rate", RATE_PCT)
pktgen.start(tx)
pktgen.delay(math.floor(DURATION * 1000))
pktgen.stop(tx)

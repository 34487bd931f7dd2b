-- classes.lua: a known mix of VoIP-like, web and bulk traffic LAN -> WAN, to check weir's
-- class counters against what was sent. Run it with conf/pktgen-classes.cfg:
--   pktgen-scripts/run --config conf/pktgen-classes.cfg classes
--
-- Loads: Pktgen's sequence mode on TX_PORT (weir's LAN port): 16 packets sent in turn, over
-- and over, each its own 5-tuple (source 10.0.1.1-16, destination 198.18.1.1-16):
--   voip  4/16  UDP to ports 5060, 5061, 10000, 20000 (the rules' edges), VOIP_SIZE bytes
--   web   6/16  TCP to port 80 (3 flows) and 443 (3 flows), PKT_SIZE bytes
--   bulk  6/16  UDP to 5062, 9999, 20001 and 443, TCP to 5060 and 8080 (just outside a
--               rule: none of them may be classified voip or web), PKT_SIZE bytes
-- The rate is RATE_PCT % of the link L (bit/s) for the average frame, so Pktgen sends
--   P = RATE_PCT/100 x L / (8 x (A + 20)) packets a second, A = (4 x VOIP_SIZE + 12 x PKT_SIZE) / 16
-- (sizes with the FCS; 20 = preamble and inter-frame gap), and per class
--   voip 4/16 x P, web 6/16 x P, bulk 6/16 x P packets a second.
-- Pktgen's memif ports report L = 100 Gbit/s: at the defaults (100 %, 64 B, VOIP_SIZE 200 B,
-- A = 98 B) it asks for P = 105.9 Mpps and sends what its port lcore can (3.2 Mpps here,
-- 2026-11); the fractions hold whatever rate weir receives. Measured through weir with
-- conf/pktgen-classes.cfg, 5 s: ports.lan.rx 27,271,808, classes voip 6,817,952 (4/16
-- exactly), web and bulk 10,226,928 (6/16 each), admitted 4/6/6, no drops.
-- expect: voip 4/16
-- expect: web 6/16
-- expect: bulk 6/16
--
-- Watch in weir's stats: shaping.outbound.classes.<name>.pkts for voip, web and bulk, each
-- equal to its fraction of ports.lan.rx (to within the frames in flight when the stats
-- were written: a pass of the 16 is 16 frames); shaping.outbound.classes.<name>.admitted
-- = the flows sent into it (voip 4, web 6, bulk 6), .drops_flow and .drops_class = 0 (the
-- classes are far above this load: nothing queues), shaping.outbound.pkts = the sum,
-- ports.lan.managed = ports.lan.rx, flows.active = 16.
RATE_PCT = RATE_PCT or 100
PKT_SIZE = PKT_SIZE or 64
FLOWS = FLOWS or 16                 -- fixed: the mix is 16 flows, one per sequence packet
DURATION = DURATION or 10
TX_PORT = TX_PORT or 0
RX_PORT = RX_PORT or 1
PCAP_DIR = PCAP_DIR or "pktgen-scripts/pcap"
VOIP_SIZE = VOIP_SIZE or 200        -- a G.711 20 ms RTP packet is 218 bytes

-- { class, protocol, destination port, size }: the order Pktgen sends them in.
local MIX = {
    { "voip", "udp", 5060, VOIP_SIZE }, { "web", "tcp", 80, PKT_SIZE },
    { "bulk", "udp", 5062, PKT_SIZE }, { "web", "tcp", 443, PKT_SIZE },
    { "voip", "udp", 5061, VOIP_SIZE }, { "bulk", "tcp", 5060, PKT_SIZE },
    { "web", "tcp", 80, PKT_SIZE }, { "bulk", "udp", 9999, PKT_SIZE },
    { "voip", "udp", 10000, VOIP_SIZE }, { "web", "tcp", 443, PKT_SIZE },
    { "bulk", "udp", 20001, PKT_SIZE }, { "web", "tcp", 80, PKT_SIZE },
    { "voip", "udp", 20000, VOIP_SIZE }, { "bulk", "udp", 443, PKT_SIZE },
    { "web", "tcp", 443, PKT_SIZE }, { "bulk", "tcp", 8080, PKT_SIZE },
}

if FLOWS ~= #MIX then
    print(string.format("classes.lua: FLOWS=%s ignored, the mix is %d flows", tostring(FLOWS), #MIX))
end
local tx = tostring(TX_PORT)

pktgen.set(tx, "size", PKT_SIZE)
pktgen.set(tx, "rate", RATE_PCT)
for i, m in ipairs(MIX) do
    -- seqnum, port, dst MAC, src MAC, dst IP, src IP/prefix, sport, dport, IP version,
    -- protocol, VLAN ID (used only with VLAN enabled on the port), frame size with FCS
    pktgen.seq(i - 1, tx, "02:00:00:00:00:02", "02:00:00:00:00:01",
        "198.18.1." .. i, "10.0.1." .. i .. "/16", 40000 + i, m[3], "ipv4", m[2], 1, m[4])
end
pktgen.set(tx, "seq_cnt", #MIX)

pktgen.start(tx)
pktgen.delay(math.floor(DURATION * 1000))
pktgen.stop(tx)

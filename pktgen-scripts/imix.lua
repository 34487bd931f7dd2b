-- imix.lua: simple IMIX, 7:4:1 frames of 64, 570 and 1518 bytes (with FCS; 353.8 bytes on
-- average), UDP from a LAN host (10.0.0.1) to a WAN host (198.18.0.1), one direction,
-- TX_PORT -> RX_PORT.
--
-- Loads: RATE_PCT percent of the port's link speed. The mix is a Pktgen sequence of 12
-- packets (7 x 64, 4 x 570, 1 x 1518, interleaved), sent in that order over and over, so
-- the ratio is about exact (Pktgen's mbuf pool cache reuses some mbufs more than others:
-- 347-350 bytes a frame were measured against 349.8 without FCS). PKT_SIZE is not used. FLOWS (1..12) spreads the 12 frames over
-- UDP source ports 1024 .. 1024+FLOWS-1 (frame i from port 1024 + i mod FLOWS). More flows
-- at IMIX do not fit Pktgen 23.03: its random-bits mode and sequences exclude each other
-- (flows-1m.lua loads many flows).
-- Watch in weir's counters: ports.lan.forwarded equal to what Pktgen received on RX_PORT,
-- ports.lan.tx_full and pmd_rx_missed (loss inside weir or before it polled),
-- flows.inserted = FLOWS, and nothing in malformed_by.
--
-- Run: pktgen-scripts/run [--fwd weir|testpmd-io|testpmd-macswap] [--config conf/pktgen.cfg]
--      [--time S] [--rate PCT] [--flows N] imix

RATE_PCT = RATE_PCT or 100
PKT_SIZE = PKT_SIZE or 64
FLOWS = FLOWS or 1
DURATION = DURATION or 10
TX_PORT = TX_PORT or 0
RX_PORT = RX_PORT or 1
PCAP_DIR = PCAP_DIR or "pktgen-scripts/pcap"

local tx, rx = tostring(TX_PORT), tostring(RX_PORT)
if FLOWS < 1 or FLOWS > 12 then error("imix.lua: FLOWS must be 1..12") end

local far = pktgen.pktStats(rx)[RX_PORT]
local far_mac = far and far.mac_addr or "02:00:00:00:00:02"
local own = pktgen.pktStats(tx)[TX_PORT]
local own_mac = own and own.mac_addr or "02:00:00:00:00:01"

-- 7:4:1, interleaved so that no burst is all large frames.
local sizes = { 64, 570, 64, 64, 570, 64, 1518, 64, 570, 64, 570, 64 }
for i, size in ipairs(sizes) do
    pktgen.seqTable(i - 1, tx, {
        eth_dst_addr = far_mac,
        eth_src_addr = own_mac,
        ip_dst_addr = "198.18.0.1",
        ip_src_addr = "10.0.0.1/16",
        sport = 1024 + (i - 1) % FLOWS,
        dport = 5001,
        ethType = "ipv4",
        ipProto = "udp",
        vlanid = 1,
        pktSize = size,
        cos = 0,
        tos = 0,
    })
end
pktgen.set(tx, "seq_cnt", #sizes)
pktgen.set(tx, "rate", RATE_PCT)

pktgen.start(tx)
pktgen.delay(math.floor(DURATION * 1000))
pktgen.stop(tx)

-- 64B.lua: the worst case for a bridge, minimum-size frames (64 bytes with FCS) of UDP from
-- a LAN host (10.0.0.1) to a WAN host (198.18.0.1), one direction, TX_PORT -> RX_PORT.
--
-- Loads: RATE_PCT percent of the port's link speed in PKT_SIZE-byte frames over FLOWS
-- flows (UDP source ports 1024 .. 1024+FLOWS-1; 1 flow sends Pktgen's prebuilt single
-- packet, more use Pktgen's range mode). At most 24576: Pktgen 23.03 builds range
-- packets once, into a pool of that many mbufs, and sends those over and over
-- (flows-1m.lua refills the pool to go further).
-- Watch in weir's counters: ports.lan.forwarded equal to what Pktgen received on RX_PORT,
-- ports.lan.tx_full (the WAN port's transmit ring was full: weir could not keep up on
-- transmit) and pmd_rx_missed/pmd_rx_nombuf (frames lost before weir polled them),
-- flows.inserted = FLOWS, and nothing in malformed_by.
--
-- Run: pktgen-scripts/run [--fwd weir|testpmd-io|testpmd-macswap] [--config conf/pktgen.cfg]
--      [--time S] [--rate PCT] [--size B] [--flows N] 64B

RATE_PCT = RATE_PCT or 100
PKT_SIZE = PKT_SIZE or 64
FLOWS = FLOWS or 1
DURATION = DURATION or 10
TX_PORT = TX_PORT or 0
RX_PORT = RX_PORT or 1
PCAP_DIR = PCAP_DIR or "pktgen-scripts/pcap"

local tx, rx = tostring(TX_PORT), tostring(RX_PORT)
if FLOWS < 1 or FLOWS > 24576 then error("64B.lua: FLOWS must be 1..24576") end

-- Frames go to the far port's MAC, as they would through a real bridge.
local far = pktgen.pktStats(rx)[RX_PORT]
local far_mac = far and far.mac_addr or "02:00:00:00:00:02"

pktgen.set_type(tx, "ipv4")
pktgen.set_proto(tx, "udp")
pktgen.set_mac(tx, "dst", far_mac)
pktgen.set_ipaddr(tx, "src", "10.0.0.1/16")
pktgen.set_ipaddr(tx, "dst", "198.18.0.1")
pktgen.set(tx, "sport", 1024)
pktgen.set(tx, "dport", 5001)
pktgen.set(tx, "size", PKT_SIZE)
pktgen.set(tx, "rate", RATE_PCT)

if FLOWS > 1 then
    pktgen.range.set_type(tx, "ipv4")
    pktgen.range.ip_proto(tx, "udp")
    pktgen.range.dst_mac(tx, "start", far_mac)
    pktgen.range.src_ip(tx, "start", "10.0.0.1")
    pktgen.range.src_ip(tx, "inc", "0.0.0.0")
    pktgen.range.src_ip(tx, "min", "10.0.0.1")
    pktgen.range.src_ip(tx, "max", "10.0.0.1")
    pktgen.range.dst_ip(tx, "start", "198.18.0.1")
    pktgen.range.dst_ip(tx, "inc", "0.0.0.0")
    pktgen.range.dst_ip(tx, "min", "198.18.0.1")
    pktgen.range.dst_ip(tx, "max", "198.18.0.1")
    pktgen.range.src_port(tx, "start", 1024)
    pktgen.range.src_port(tx, "inc", 1)
    pktgen.range.src_port(tx, "min", 1024)
    pktgen.range.src_port(tx, "max", 1024 + FLOWS - 1)
    pktgen.range.dst_port(tx, "start", 5001)
    pktgen.range.dst_port(tx, "inc", 0)
    pktgen.range.dst_port(tx, "min", 5001)
    pktgen.range.dst_port(tx, "max", 5001)
    pktgen.range.pkt_size(tx, "start", PKT_SIZE)
    pktgen.range.pkt_size(tx, "inc", 0)
    pktgen.range.pkt_size(tx, "min", PKT_SIZE)
    pktgen.range.pkt_size(tx, "max", PKT_SIZE)
    pktgen.set_range(tx, "on")
else
    pktgen.set_range(tx, "off")
end

pktgen.start(tx)
pktgen.delay(math.floor(DURATION * 1000))
pktgen.stop(tx)

-- tcp-bulk-acks.lua: FLOWS TCP bulk transfers, data LAN -> WAN and their pure ACKs WAN -> LAN
-- (window scale, timestamps, SACK), so weir's PostACK ACK path runs at line rate.
-- pktgen-args: -s 0:tcp-data.pcap -s 1:tcp-acks.pcap
--
-- Needs the pcaps first: pktgen-scripts/make-pcaps --flows FLOWS --size PKT_SIZE (defaults
-- 64 and 1518, this script's defaults too; the pktgen-args line above loads them on Pktgen
-- ports 0 and 1: change it with TX_PORT/RX_PORT). Run with a config whose shaping holds the
-- data below what is offered, e.g. conf/pktgen-classes.cfg (class "capped", 500 Mbit/s,
-- takes TCP to WAN port 5201: these flows):
--   pktgen-scripts/make-pcaps && pktgen-scripts/run --config conf/pktgen-classes.cfg tcp-bulk-acks
--
-- Loads: both ports replay their pcap in a loop. TX_PORT (weir's LAN port) sends
-- tcp-data.pcap at RATE_PCT % of the link: for each flow (10.0.16.x:40000+ -> 198.18.0.10:
-- 5201) its SYN (MSS 1460, SACK permitted, timestamps, window scale 7), the handshake's
-- last ACK and 16 full segments with timestamps, flows interleaved. RX_PORT (weir's WAN
-- port) sends tcp-acks.pcap, the same 5-tuples reversed: each flow's SYN+ACK (window scale
-- 9) and one pure ACK per two segments (timestamps; every other ACK carries a SACK block),
-- at the rate that makes it one pass of ACKs per pass of data (ACK_PCT below, printed).
-- Pktgen 23.03 paces all ports of one lcore by the first one's rate (pktgen.c: the loop
-- reads infos[0]->tx_cycles) and each port sends its own burst per tick, so the ACK port
-- gets half the data port's burst (DATA_BURST, ACK_BURST) and a rate giving the same tick:
-- one ACK per two data frames whichever port paces. The ratio holds only while Pktgen
-- reaches the rate: memif ports report 100 Gbit/s, so keep RATE_PCT at 10 or below there.
-- weir learns each flow's scales and MSS from the SYN and SYN+ACK, which every pass
-- repeats (a SYN on a live flow changes nothing but the scale it restates): the order
-- the two ports start in does not matter. Sequence numbers repeat each pass: the ACK
-- clock is not a real one, the point is the per-packet work.
--
-- Watch in weir's stats:
--   flows.active = FLOWS (flows.inserted = FLOWS), ports.lan.managed = ports.lan.rx and
--   ports.wan.managed = ports.wan.rx (every frame is TCP of a tracked flow);
--   postack.held, postack.released, postack.acks_held, postack.acks_held_peak, postack.paced,
--   postack.pool_full: ACKs held while the flow's data waits in its class, released with it;
--   ports.wan.win_clamped: held ACKs whose window PostACK cut (needs both scales: the SYNs);
--   shaping.outbound.classes.capped.pkts/bytes at its 500 Mbit/s and .drops_flow (data
--   offered above it: Pktgen does not slow down for held ACKs, so weir drops the excess);
--   ports.wan.forwarded (ACKs passed or released) and ports.lan.forwarded.
-- With conf/pktgen.cfg (no shaping) nothing is held: postack is null, every frame forwarded.
RATE_PCT = RATE_PCT or 5
PKT_SIZE = PKT_SIZE or 1518
FLOWS = FLOWS or 64
DURATION = DURATION or 10
TX_PORT = TX_PORT or 0
RX_PORT = RX_PORT or 1
PCAP_DIR = PCAP_DIR or "pktgen-scripts/pcap"

local ROUNDS = 16                   -- data segments per flow per pass (make-pcaps)
local DATA_BURST = 64               -- frames per tick, data port (Pktgen's default burst)
local OVERHEAD = 24                 -- what Pktgen adds to a frame to rate it: FCS, preamble, gap

-- The pcaps' average frame sizes (without FCS), as make-pcaps builds them: data = SYN (74),
-- last handshake ACK (66), ROUNDS segments; ACKs = SYN+ACK (74), ROUNDS/2 ACKs of 66 and
-- 78 bytes (with a SACK block) alternating.
local data_frames = 2 + ROUNDS
local ack_frames = 1 + ROUNDS // 2
local data_avg = (74 + 66 + ROUNDS * (PKT_SIZE - 4)) / data_frames
local ack_avg = (74 + (ROUNDS // 2) * 72) / ack_frames
-- Pktgen paces a pcap port by its average frame: one pass of ACKs per pass of data.
local ACK_PCT = RATE_PCT * (ack_avg + OVERHEAD) / (data_avg + OVERHEAD) * ack_frames / data_frames
local ACK_BURST = DATA_BURST * ack_frames // data_frames    -- exactly half: 1 + R/2 of 2 + R

-- make-pcaps records what it built: say so when it does not match.
local f = io.open(PCAP_DIR .. "/tcp-bulk-acks.info", "r")
if f then
    local info = {}
    for line in f:lines() do
        local k, v = line:match("^(%w+)=(.*)$")
        if k then info[k] = tonumber(v) or v end
    end
    f:close()
    if info.flows ~= FLOWS or info.size ~= PKT_SIZE then
        print(string.format("tcp-bulk-acks: the pcaps hold %s flows of %s-byte frames, not %d of %d:" ..
            " run pktgen-scripts/make-pcaps --flows %d --size %d", tostring(info.flows),
            tostring(info.size), FLOWS, PKT_SIZE, FLOWS, PKT_SIZE))
    end
else
    print("tcp-bulk-acks: no " .. PCAP_DIR .. "/tcp-bulk-acks.info: run pktgen-scripts/make-pcaps first")
end

local tx, rx = tostring(TX_PORT), tostring(RX_PORT)
print(string.format("tcp-bulk-acks: %d flows, data at %.3f %%, ACKs at %.3f %% of the link",
    FLOWS, RATE_PCT, ACK_PCT))

-- pcap mode first: turning it on resets the port's pacing (enable_pcap() zeroes tx_cycles:
-- no rate limit at all), and the rate is computed from the pcap's average frame only then.
pktgen.pcap(tx, "on")
pktgen.pcap(rx, "on")
pktgen.set(tx, "burst", DATA_BURST)
pktgen.set(rx, "burst", ACK_BURST)
pktgen.set(tx, "rate", RATE_PCT)
pktgen.set(rx, "rate", ACK_PCT)
pktgen.start(tx)
pktgen.start(rx)
pktgen.delay(math.floor(DURATION * 1000))
pktgen.stop(tx)
pktgen.stop(rx)

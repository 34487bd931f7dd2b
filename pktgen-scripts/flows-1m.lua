-- flows-1m.lua: a million concurrent UDP 5-tuples LAN -> WAN, to fill weir's flow table.
--
-- Loads: UDP frames of PKT_SIZE bytes at RATE_PCT % of the link from TX_PORT (weir's LAN
-- port) to 198.18.0.1:5001, from N_IP source addresses in 10.0.0.0/16 times N_PORT source
-- ports (1024 up), N_IP x N_PORT >= FLOWS distinct 5-tuples (1,002,785 for 10^6). RX_PORT
-- only receives. Pktgen holds only 24576 of them at a time (below): every REARM_MS it
-- builds the next 24576, so all of them have been sent once after ceil(FLOWS / 24576)
-- refills (41 for 10^6: ~16 s at the default 400 ms, hence DURATION 20), and weir holds
-- them all at once (its UDP idle timeout is 60 s). Measured here (2 vCPUs, memif, 6 s
-- runs): no refill 6.2 Mpps over 24,576 flows; a refill a second 5.0 Mpps, 147,456 flows;
-- a refill costs Pktgen ~0.24 s of sending, so with REARM_MS much below that nearly
-- nothing is sent (100 ms: 5,312 frames in 10 s). At the defaults (20 s, 400 ms) through
-- weir with conf/pktgen.cfg: 3.84 Mpps, flows.inserted 1,002,785 (every tuple), flows.full
-- 0; flows.expired 142,625 by the time weir stopped well after Pktgen (tuples sent only
-- for one refill early in the run had then been idle past the 60 s UDP timeout).
-- Watch in weir's stats (counters of the stats file):
--   flows.inserted   climbs by 24576 a refill to N_IP x N_PORT, then stays flat;
--   flows.active     = N_IP x N_PORT if flows.capacity allows it, else the capacity;
--   flows.full, ports.lan.flow_full   packets of tuples that found the table full (weir
--                    never evicts a live entry: they are bridged unmanaged); 0 when
--                    flows.capacity >= FLOWS (weir's default capacity is 65536: give
--                    flows = { capacity = 1048576; } or more to hold them all);
--   flows.expired    0 while the run is shorter than flows.timeouts.udp (default 60 s);
--   ports.lan.rx, ports.lan.managed, ports.lan.forwarded, ports.wan.tx, pmd_rx_missed
--                    (what weir could not keep up with), mbufs.in_use, workers[].flows_active.
--
-- How Pktgen makes a million tuples: in range mode each field steps on its own, one
-- increment per packet built, wrapping from max to min. Source address and source port
-- step together, so the tuple sequence repeats after lcm(N_IP, N_PORT) packets: N_PORT is
-- the prime 4093 and N_IP = ceil(FLOWS / 4093) < 4093, coprime, so lcm = N_IP x N_PORT and
-- every (address, port) pair occurs. But Pktgen 23.03 builds range packets only when it
-- fills its range mbuf pool (pktgen.info.maxMbufsPerPort mbufs, 24576), at start or when
-- a setting marks the port's packets stale; it then sends those same mbufs over and over.
-- So this script marks them stale every REARM_MS ms (pktgen.set(port, "ttl", 64): it
-- touches only the single-packet template) and Pktgen refills the pool with the next
-- 24576 tuples of the sequence. REARM_MS (default 400) must leave the pool time to go out
-- at least once after its refill: ~0.24 s of refill here, plus 2 x pool / rate at the rate
-- asked (LINK_MBPS: the link speed Pktgen rates against; memif ports report 100 Gbit/s;
-- a port whose speed Pktgen cannot read is taken as 10 Gbit/s).
RATE_PCT = RATE_PCT or 100
PKT_SIZE = PKT_SIZE or 64
FLOWS = FLOWS or 1000000
DURATION = DURATION or 20
TX_PORT = TX_PORT or 0
RX_PORT = RX_PORT or 1
PCAP_DIR = PCAP_DIR or "pktgen-scripts/pcap"
LINK_MBPS = LINK_MBPS or 100000
REARM_MS = REARM_MS or nil          -- nil: 400, or more at low rates (below)

local N_PORT_MAX = 4093             -- prime: coprime with any N_IP below it
local PORT_MIN = 1024
local IP_MIN = 10 << 24 | 1         -- 10.0.0.1
local DST_IP, DST_PORT = "198.18.0.1", 5001

local function ip4(n)
    return string.format("%d.%d.%d.%d", n >> 24 & 255, n >> 16 & 255, n >> 8 & 255, n & 255)
end

local flows = math.floor(FLOWS)
local n_port = math.min(flows, N_PORT_MAX)
local n_ip = (flows + n_port - 1) // n_port
assert(n_ip < 65534, "FLOWS too large for 10.0.0.0/16 x 4093 ports")
local pool = (pktgen.info and pktgen.info.maxMbufsPerPort) or 24576
local pps = RATE_PCT / 100 * LINK_MBPS * 1e6 / ((PKT_SIZE + 20) * 8)
local rearm = math.floor(REARM_MS or math.max(400, 240 + math.ceil(2 * pool / pps * 1000)))

local tx, rx = tostring(TX_PORT), tostring(RX_PORT)
print(string.format("flows-1m: %d source addresses x %d source ports = %d tuples; pool %d, re-arm every %d ms",
    n_ip, n_port, n_ip * n_port, pool, rearm))

pktgen.set(tx, "size", PKT_SIZE)
pktgen.set(tx, "rate", RATE_PCT)
pktgen.range.set_type(tx, "ipv4")
pktgen.range.ip_proto(tx, "udp")
pktgen.range.dst_mac(tx, "start", "02:00:00:00:00:02")
pktgen.range.src_mac(tx, "start", "02:00:00:00:00:01")
for _, w in ipairs({ "start", "min", "max" }) do
    pktgen.range.dst_ip(tx, w, DST_IP)
    pktgen.range.dst_port(tx, w, DST_PORT)
    pktgen.range.pkt_size(tx, w, PKT_SIZE)
end
pktgen.range.dst_ip(tx, "inc", "0.0.0.0")
pktgen.range.dst_port(tx, "inc", 0)
pktgen.range.pkt_size(tx, "inc", 0)
pktgen.range.src_ip(tx, "start", ip4(IP_MIN))
pktgen.range.src_ip(tx, "min", ip4(IP_MIN))
pktgen.range.src_ip(tx, "max", ip4(IP_MIN + n_ip - 1))
pktgen.range.src_ip(tx, "inc", "0.0.0.1")
pktgen.range.src_port(tx, "start", PORT_MIN)
pktgen.range.src_port(tx, "min", PORT_MIN)
pktgen.range.src_port(tx, "max", PORT_MIN + n_port - 1)
pktgen.range.src_port(tx, "inc", 1)
pktgen.set_range(tx, "on")

pktgen.start(tx)
local total, elapsed = math.floor(DURATION * 1000), 0
while elapsed < total do
    local step = math.min(rearm, total - elapsed)
    pktgen.delay(step)
    elapsed = elapsed + step
    if elapsed < total then
        pktgen.set(tx, "ttl", 64)   -- refill the range pool with the next tuples
    end
end
pktgen.stop(tx)

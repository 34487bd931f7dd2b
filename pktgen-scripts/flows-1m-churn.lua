-- flows-1m-churn.lua: a million concurrent UDP 5-tuples LAN -> WAN that come and go:
-- every second CHURN_PCT % of them stop and as many new ones start.
--
-- Loads: as flows-1m.lua (read its header for how Pktgen's range mode makes the tuples):
-- UDP frames of PKT_SIZE bytes at RATE_PCT % of the link from TX_PORT (weir's LAN port)
-- to 198.18.0.1:5001, from a window of N_IP source addresses in 10.0.0.0/16 times N_PORT
-- source ports, N_IP x N_PORT >= FLOWS. Once a second the address window slides up by
-- SHIFT = ceil(N_IP x CHURN_PCT / 100) addresses: the SHIFT x N_PORT tuples of the
-- addresses that left it are never sent again, SHIFT x N_PORT new ones begin (about
-- 100,000 a second at the defaults). But Pktgen builds only 24576 tuples per refill of
-- its range pool, a refill every REARM_MS (default 400: a refill costs it ~0.24 s here),
-- so ~61,000 tuples a second are sent, walking through the window: weir sees ~61,000 new
-- flows a second (each tuple of the window in turn, the window moving on) and the old ones
-- idle until they expire. RX_PORT only receives. Measured through weir with
-- conf/pktgen.cfg, 15 s: 3.70 Mpps, flows.inserted 1,006,297 (67,000 new flows a second),
-- flows.full 0, flows.expired 59,750 by the time weir stopped, well after Pktgen.
--
-- Watch in weir's stats (counters of the stats file):
--   flows.inserted   + 24576 a refill (~61,000 a second), the rate of new flows;
--   flows.expired    the stopped tuples, once idle past flows.timeouts.udp (default 60 s:
--                    beyond a short run; give timeouts = { udp = 2; } to see them within it);
--   flows.active     grows by ~61,000 a second while nothing expires: conf/pktgen.cfg's
--                    1,048,576 entries are full after ~17 s;
--   flows.full, ports.lan.flow_full   packets of new tuples that found the table full:
--                    weir never evicts a live entry, so until the oldest expire the new
--                    flows are bridged unmanaged;
--   ports.lan.rx, ports.lan.managed, ports.lan.forwarded, ports.wan.tx, pmd_rx_missed.
RATE_PCT = RATE_PCT or 100
PKT_SIZE = PKT_SIZE or 64
FLOWS = FLOWS or 1000000
DURATION = DURATION or 10
TX_PORT = TX_PORT or 0
RX_PORT = RX_PORT or 1
PCAP_DIR = PCAP_DIR or "pktgen-scripts/pcap"
CHURN_PCT = CHURN_PCT or 10
LINK_MBPS = LINK_MBPS or 100000
REARM_MS = REARM_MS or nil          -- nil: 400, or more at low rates, as in flows-1m.lua

local N_PORT_MAX = 4093             -- prime: coprime with any N_IP below it
local PORT_MIN = 1024
local IP_BASE = 10 << 24 | 1        -- 10.0.0.1
local IP_SPAN = 65534               -- host addresses of 10.0.0.0/16
local DST_IP, DST_PORT = "198.18.0.1", 5001

local function ip4(n)
    return string.format("%d.%d.%d.%d", n >> 24 & 255, n >> 16 & 255, n >> 8 & 255, n & 255)
end

local flows = math.floor(FLOWS)
local n_port = math.min(flows, N_PORT_MAX)
local n_ip = (flows + n_port - 1) // n_port
local shift = math.max(1, math.ceil(n_ip * CHURN_PCT / 100))
assert(n_ip < IP_SPAN // 2, "FLOWS too large for a sliding window in 10.0.0.0/16")
local pool = (pktgen.info and pktgen.info.maxMbufsPerPort) or 24576
local pps = RATE_PCT / 100 * LINK_MBPS * 1e6 / ((PKT_SIZE + 20) * 8)
local rearm = math.floor(REARM_MS or math.max(400, 240 + math.ceil(2 * pool / pps * 1000)))

local tx = tostring(TX_PORT)

-- The window of source addresses for second `sec`: [lo, lo + n_ip - 1], wrapping inside
-- the /16 (a wrapped window restarts at its bottom: old tuples come back only after the
-- whole /16 went by, long after they expired).
local function window(sec)
    local lo = (sec * shift) % (IP_SPAN - n_ip + 1)
    pktgen.range.src_ip(tx, "min", ip4(IP_BASE + lo))
    pktgen.range.src_ip(tx, "max", ip4(IP_BASE + lo + n_ip - 1))
end

print(string.format("flows-1m-churn: %d x %d tuples, %d addresses (%d tuples) replaced a second",
    n_ip, n_port, shift, shift * n_port))

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
pktgen.range.src_ip(tx, "start", ip4(IP_BASE))
pktgen.range.src_ip(tx, "inc", "0.0.0.1")
window(0)
pktgen.range.src_port(tx, "start", PORT_MIN)
pktgen.range.src_port(tx, "min", PORT_MIN)
pktgen.range.src_port(tx, "max", PORT_MIN + n_port - 1)
pktgen.range.src_port(tx, "inc", 1)
pktgen.set_range(tx, "on")

pktgen.start(tx)
local total, elapsed, sec = math.floor(DURATION * 1000), 0, 0
while elapsed < total do
    local step = math.min(rearm, total - elapsed, (sec + 1) * 1000 - elapsed)
    pktgen.delay(step)
    elapsed = elapsed + step
    if elapsed >= total then
        break
    end
    if elapsed >= (sec + 1) * 1000 then
        sec = sec + 1
        window(sec)
    end
    pktgen.set(tx, "ttl", 64)       -- refill the range pool with the next tuples
end
pktgen.stop(tx)

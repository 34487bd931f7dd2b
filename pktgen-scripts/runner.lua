-- pktgen-scripts/runner.lua: what pktgen-scripts/run hands Pktgen-DPDK (-f). Not a load script.
--
-- The runner passes its options as environment variables named like the scripts' globals
-- (RATE_PCT, PKT_SIZE, FLOWS, DURATION, TX_PORT, RX_PORT, PCAP_DIR), plus
--   WEIR_SCRIPT  the load script to run (a path)
--   WEIR_OUT     where to write the JSON result
--   WEIR_QUIT_WAIT  "1": after writing WEIR_OUT, wait for WEIR_OUT.quit before quitting
-- This wrapper defines those globals, waits for every port's link, clears the statistics,
-- runs the script (which starts traffic, waits DURATION seconds and stops), waits for the
-- queues to drain and Pktgen's once-a-second statistics to settle, writes every port's
-- pktgen.portStats/pktgen.pktStats as JSON to WEIR_OUT and quits Pktgen. An error in the
-- script is written to the JSON ("error") and Pktgen still quits: it never waits at its
-- prompt.

local function num(name)
    local v = os.getenv(name)
    if v ~= nil and v ~= "" then _G[name] = tonumber(v) end
end
for _, n in ipairs({ "RATE_PCT", "PKT_SIZE", "FLOWS", "DURATION", "TX_PORT", "RX_PORT" }) do num(n) end
if os.getenv("PCAP_DIR") and os.getenv("PCAP_DIR") ~= "" then PCAP_DIR = os.getenv("PCAP_DIR") end

local script = os.getenv("WEIR_SCRIPT")
local out = os.getenv("WEIR_OUT") or "/tmp/weir-pktgen.json"

-- Seconds since boot (10 ms resolution): Lua's os.time counts whole seconds only.
local function now()
    local f = io.open("/proc/uptime", "r")
    if not f then return os.time() end
    local t = f:read("n")
    f:close()
    return t
end

-- A small JSON writer: tables with only integer keys 1..n become arrays, others objects.
local function json(v, buf)
    local t = type(v)
    if t == "table" then
        local n = #v
        local is_array = n > 0
        if is_array then
            for k in pairs(v) do
                if math.type(k) ~= "integer" or k < 1 or k > n then is_array = false break end
            end
        end
        if is_array then
            buf[#buf + 1] = "["
            for i = 1, n do
                if i > 1 then buf[#buf + 1] = "," end
                json(v[i], buf)
            end
            buf[#buf + 1] = "]"
        else
            local keys = {}
            for k in pairs(v) do keys[#keys + 1] = tostring(k) end
            table.sort(keys)
            buf[#buf + 1] = "{"
            for i, k in ipairs(keys) do
                if i > 1 then buf[#buf + 1] = "," end
                json(k, buf)
                buf[#buf + 1] = ":"
                local val = v[k]
                if val == nil then val = v[tonumber(k)] end
                json(val, buf)
            end
            buf[#buf + 1] = "}"
        end
    elseif t == "string" then
        buf[#buf + 1] = '"' .. v:gsub('[%c"\\]', function(c)
            return string.format("\\u%04x", c:byte())
        end) .. '"'
    elseif t == "number" then
        if v ~= v or v == math.huge or v == -math.huge then
            buf[#buf + 1] = "null"
        elseif math.type(v) == "integer" then
            buf[#buf + 1] = string.format("%d", v)
        else
            buf[#buf + 1] = string.format("%.17g", v)
        end
    elseif t == "boolean" then
        buf[#buf + 1] = tostring(v)
    else
        buf[#buf + 1] = "null"
    end
end

local result = { script = script, params = {}, ports = {}, links = {} }
local function snapshot()
    local ps = pktgen.portStats("all", "port")
    local pk = pktgen.pktStats("all")
    local ports = {}
    for pid = 0, (ps.n or 0) - 1 do
        if ps[pid] then ports[tostring(pid)] = { port = ps[pid], pkt = pk[pid] } end
    end
    return ports
end

local function totals(ports)
    local s = 0
    for _, p in pairs(ports) do s = s + p.port.ipackets + p.port.opackets end
    return s
end

local ok, err = pcall(function()
    if script == nil or script == "" then error("WEIR_SCRIPT is not set") end
    -- Links first: a memif port is up once its peer has connected.
    local t0 = now()
    while true do
        local ls = pktgen.linkState("all")
        local all_up = (ls.n or 0) > 0
        for pid = 0, (ls.n or 0) - 1 do
            result.links[tostring(pid)] = ls[pid]
            if not tostring(ls[pid]):find("UP") then all_up = false end
        end
        if all_up then break end
        if now() - t0 > 20 then error("links not up after 20 s") end
        pktgen.delay(100)
    end
    result.link_wait_s = now() - t0
    pktgen.clr()
    pktgen.delay(1100)   -- the statistics timer rebases once a second
    local t1 = now()
    dofile(script)
    result.traffic_s = now() - t1
    result.params = { RATE_PCT = RATE_PCT, PKT_SIZE = PKT_SIZE, FLOWS = FLOWS, DURATION = DURATION,
                      TX_PORT = TX_PORT, RX_PORT = RX_PORT, PCAP_DIR = PCAP_DIR }
    -- Drain, then wait until Pktgen's counters (refreshed once a second by its timer
    -- thread) stop moving: at least 1.5 s, at most 6 s.
    local last, waited = -1, 0
    pktgen.delay(1500)
    while waited < 4500 do
        local cur = totals(snapshot())
        if cur == last then break end
        last = cur
        pktgen.delay(1100)
        waited = waited + 1100
    end
end)
if not ok then result.error = tostring(err) end

local ok2, err2 = pcall(function() result.ports = snapshot() end)
if not ok2 then result.error = (result.error or "") .. " stats: " .. tostring(err2) end

local buf = {}
json(result, buf)
local f = io.open(out .. ".tmp", "w")
if f then
    f:write(table.concat(buf), "\n")
    f:close()
    os.rename(out .. ".tmp", out)
end
-- The runner stops the forwarder before Pktgen disconnects: DPDK 22.11's memif PMD can
-- fault in a peer still polling a ring whose other end goes away. It creates
-- WEIR_OUT.quit once the forwarder is down (or never, when run by hand: 30 s at most).
if os.getenv("WEIR_QUIT_WAIT") == "1" then
    for _ = 1, 300 do
        local q = io.open(out .. ".quit", "r")
        if q then q:close() break end
        pktgen.delay(100)
    end
end
pktgen.quit()

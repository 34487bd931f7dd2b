-- weir example: a daily quota per LAN host. A host that has moved more
-- than LIMIT bytes today (both directions) gets its new flows shaped in
-- the "slow" class until midnight.
--
-- What it shows: the statistics hooks and an on_flow decision. on_stats
-- reports, per LAN host, what its open flows have moved so far; on_flow_end
-- reports each finished flow's totals. Their sum is the host's usage.
-- Flows already open keep their class: the decision is made for new flows.
-- A flow open across midnight counts whole on the day it ends.
--
-- How to use it: policy = { script = "../lua/examples/quota.lua"; }; in the
-- config file; set LIMIT, the link rates and the slow class's rate. The
-- counts live in the script and start over when it is reloaded (SIGHUP).

local LIMIT = 10e9                      -- bytes a day per LAN host
local UP, DOWN = 50e6, 200e6            -- bit/s
local SLOW = 2e6                        -- bit/s, each direction, all slow hosts together

for dir, rate in pairs({ outbound = UP, inbound = DOWN }) do
  weir.link{ dir = dir, rate = rate, default = "normal" }
  weir.class{ dir = dir, name = "normal", rate = rate - SLOW, prio = 0 }
  weir.class{ dir = dir, name = "slow", rate = SLOW, ceil = SLOW, prio = 1 }
end

local done = {}         -- host -> bytes of its flows that ended today
local open = {}         -- host -> bytes of its open flows, at the last on_stats

local function used(host)
  return (done[host] or 0) + (open[host] or 0)
end

weir.on_stats(function(s)
  open = {}
  for host, h in pairs(s.hosts) do
    open[host] = h.bytes_out + h.bytes_in
  end
end)

weir.on_flow_end(function(f)
  local n = f.bytes_out + f.bytes_in
  done[f.lan] = (done[f.lan] or 0) + n
  -- The flow is in `open` until the next on_stats: do not count it twice.
  if open[f.lan] then
    open[f.lan] = math.max(0, open[f.lan] - n)
  end
end)

weir.on_flow(function(f)
  if used(f.lan) > LIMIT then
    return "slow"
  end
  return nil
end)

weir.at("00:00", function()
  done = {}
end)

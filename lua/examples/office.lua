-- weir example: an office uplink with four priorities and a capped guest VLAN.
--
-- What it shows: strict ordering by prio (VoIP > interactive > web >
-- bulk) for borrowing idle bandwidth, a guest VLAN that may never take
-- more than its ceil however idle the link is, one function declaring both
-- directions, and an on_flow hook that moves a LAN host's flows beyond
-- MAX_FLOWS concurrent ones to the bulk class (a host opening hundreds of
-- connections, say a download manager or a worm, cannot crowd out its
-- neighbours' web browsing).
--
-- How to use it: policy = { script = "../lua/examples/office.lua"; }; in the
-- config file; set UP and DOWN to your line's rates and GUEST_VLAN to your
-- guest network's VLAN ID. Check it with `weir --config ... --check`.

local UP, DOWN = 50e6, 200e6          -- bit/s
local GUEST_VLAN = 30
local MAX_FLOWS = 20

-- Shares of the link, in per cent of its rate.
local classes = {
  { name = "voip", share = 5, prio = 0 },
  { name = "interactive", share = 15, prio = 1 },
  { name = "web", share = 50, prio = 2 },
  { name = "bulk", share = 20, prio = 3 },
  -- ceil = share: guests never borrow beyond 10 %.
  { name = "guest", share = 10, prio = 4, capped = true },
}

local function tree(dir, rate)
  weir.link{ dir = dir, rate = rate, default = "bulk" }
  for _, c in ipairs(classes) do
    local r = math.floor(rate * c.share / 100)
    weir.class{ dir = dir, name = c.name, rate = r, prio = c.prio,
                ceil = c.capped and r or nil }
  end
end

tree("outbound", UP)
tree("inbound", DOWN)

-- First match wins: the guest VLAN comes first, so a guest's VoIP call is
-- still a guest's.
weir.rule{ class = "guest", vlan = GUEST_VLAN }
weir.rule{ class = "voip", proto = "udp", wan_port = "5060-5061" }
weir.rule{ class = "voip", dscp = "EF" }
for _, p in ipairs({ 22, 3389 }) do
  weir.rule{ class = "interactive", proto = "tcp", wan_port = p }
end
weir.rule{ class = "interactive", proto = "udp", wan_port = 53 }
for _, p in ipairs({ 80, 443 }) do
  weir.rule{ class = "web", proto = "tcp", wan_port = p }
end
weir.rule{ class = "web", proto = "udp", wan_port = 443 }   -- QUIC

-- Flows each LAN host has open. New flows reach the hook asynchronously
-- and rate-limited, so the count is an estimate; it never goes below 0.
local open = {}

weir.on_flow(function(f)
  local n = (open[f.lan] or 0) + 1
  open[f.lan] = n
  -- Guests and VoIP keep their class; everyone else's extra flows go bulk.
  if n > MAX_FLOWS and f.class.outbound ~= "guest" and f.class.outbound ~= "voip" then
    return "bulk"
  end
  return nil
end)

weir.on_flow_end(function(f)
  local n = (open[f.lan] or 0) - 1
  open[f.lan] = n > 0 and n or nil
end)

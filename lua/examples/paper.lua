-- weir example: the PostACK paper's introduction, scaled up 100 times.
--
-- What it shows: per-flow minimum rates with admission control. The paper
-- divides a 125 kbit/s link between VoIP (90 kbit/s) and FTP (35 kbit/s)
-- and promises each FTP session at least 10 kbit/s; here that is a
-- 12.5 Mbit/s link, VoIP 9 Mbit/s, FTP 3.5 Mbit/s and 1 Mbit/s per FTP
-- session. A fourth FTP session would push every session below its
-- minimum, so it is not admitted (its SYN is dropped; TCP retries it once
-- a session has ended) instead of slowing down the three already running.
--
-- How to use it: point the config file at it,
--     policy = { script = "../lua/examples/paper.lua"; };
-- and set the link rate to what your uplink really carries (a shaper only
-- works when it, not the modem, is the bottleneck). Check it with
-- `weir --config ... --check`.

local LINK = "12.5mbit"

for _, dir in ipairs({ "outbound", "inbound" }) do
  weir.link{ dir = dir, rate = LINK, default = "other" }
  -- VoIP first: it borrows idle bandwidth before anyone else.
  weir.class{ dir = dir, name = "voip", rate = "9mbit", prio = 0 }
  weir.class{ dir = dir, name = "ftp", rate = "3.5mbit", prio = 1,
              flow_min = "1mbit", admission = "drop" }
  -- The paper's link carries nothing else; a real one carries DNS, NTP
  -- and the like. They get the smallest guarantee there is and borrow
  -- what VoIP and FTP leave idle.
  weir.class{ dir = dir, name = "other", rate = "8kbit", prio = 2 }
end

-- SIP signalling and RTP media (the usual ports; EF-marked packets too).
weir.rule{ class = "voip", proto = "udp", wan_port = "5060-5061" }
weir.rule{ class = "voip", proto = "udp", wan_port = "16384-32767" }
weir.rule{ class = "voip", dscp = "EF" }
-- FTP control and active-mode data. Passive-mode data connections use
-- ports the server picks: add the range your FTP server is configured for.
weir.rule{ class = "ftp", proto = "tcp", wan_port = "20-21" }

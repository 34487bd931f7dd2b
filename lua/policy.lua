-- weir: the default policy, in Lua (app/weir/policy_lua.c, lua/README.md).
--
-- conf/weir.cfg ships with no classes or rules (its shaping trees and rules
-- are commented out), so this is the example of docs/classes.md instead:
-- the same classes and rules, written with weir.link, weir.class and
-- weir.rule. Keys and values mean what they mean there.

-- LAN -> WAN: a 30 Mbit/s link divided among five classes.
weir.link{ dir = "outbound", rate = "30mbit", default = "bulk" }

weir.class{ dir = "outbound", name = "staff", rate = "20mbit" }
weir.class{ dir = "outbound", name = "voip", parent = "staff", rate = "2mbit", ceil = "2mbit",
            prio = 0, flow_min = "100kbit", admission = "drop" }
weir.class{ dir = "outbound", name = "web", parent = "staff", rate = "18mbit", prio = 1 }
weir.class{ dir = "outbound", name = "video", rate = "5mbit", flow_min = "1mbit",
            fallback = "bulk" }
weir.class{ dir = "outbound", name = "bulk", rate = "5mbit", prio = 2, limit = 2000 }

-- WAN -> LAN: a rate alone, one leaf "default" holding every flow.
weir.link{ dir = "inbound", rate = "100mbit" }

-- First match wins; all conditions of a rule must hold.
weir.rule{ class = "voip", proto = "udp", wan_port = "5060-5061", dscp = "EF" }
weir.rule{ class = "web", proto = "tcp", wan_port = 443, lan = "10.1.0.0/16" }
weir.rule{ class = "video", wan = "198.51.100.0/24", weight = 2 }
weir.rule{ class = "bulk", vlan = 20, dir = "in" }

"""Linux HTB in weir's place: the kernel baseline for the shaping experiments.

The gateway namespace bridges gw-lan and gw-wan (as the linux-bridge gateway) and
puts an HTB tree with pfifo leaves on each egress: gw-wan shapes outbound (LAN to
WAN) traffic, gw-lan inbound. A spec mirrors weir's class config:

    {"outbound": {"rate": "30mbit", "default": "bulk",
                  "classes": [{"name": "gold", "rate": "20mbit", "ceil": "30mbit",
                               "prio": 0, "wan_ports": [5201, 5204]}, ...]},
     "inbound": {...}, "limit": 1000}

Flows are put in a class by their WAN-side TCP/UDP port (u32 filters: the
destination port on gw-wan, the source port on gw-lan), unmatched ones go to the
default class. Offloads are turned off on the bridge ports so HTB sees the frames
the wire would carry, not 64 KB GSO bursts.
"""
from . import netns

DEV = {"outbound": "gw-wan", "inbound": "gw-lan"}


def _tc(*args):
    netns.sh(netns.in_ns("gw", ["tc", *args]))


def setup(spec):
    netns.bridge("gw", "br0", ["gw-lan", "gw-wan"])
    for dev in DEV.values():
        netns.sh(netns.in_ns("gw", ["ethtool", "-K", dev, "gso", "off", "gro", "off",
                                    "tso", "off"]), check=False)
    limit = str(spec.get("limit", 1000))
    for direction, dev in DEV.items():
        tree = spec.get(direction)
        if not tree:
            continue
        classes = tree.get("classes") or [{"name": "default", "rate": tree["rate"]}]
        ids = {c["name"]: 10 + i for i, c in enumerate(classes)}
        default = tree.get("default", classes[0]["name"])
        _tc("qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb",
            "default", str(ids[default]))
        _tc("class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
            "rate", tree["rate"], "ceil", tree["rate"])
        for c in classes:
            cid = ids[c["name"]]
            _tc("class", "add", "dev", dev, "parent", "1:1", "classid", f"1:{cid}", "htb",
                "rate", c["rate"], "ceil", c.get("ceil", tree["rate"]),
                "prio", str(c.get("prio", 0)))
            _tc("qdisc", "add", "dev", dev, "parent", f"1:{cid}", "handle", f"{cid}:",
                "pfifo", "limit", limit)
            lo_hi = c.get("wan_ports")
            if not lo_hi:
                continue
            field = "dport" if direction == "outbound" else "sport"
            for port in range(lo_hi[0], lo_hi[1] + 1):
                _tc("filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
                    "u32", "match", "ip", field, str(port), "0xffff", "flowid", f"1:{cid}")


def stats(direction):
    """tc's per-class counters (bytes, packets, drops, backlog) of one direction."""
    cp = netns.sh(netns.in_ns("gw", ["tc", "-s", "-j", "class", "show", "dev", DEV[direction]]),
                  check=False)
    import json
    try:
        return json.loads(cp.stdout or "[]")
    except ValueError:
        return []


def teardown():
    for dev in DEV.values():
        netns.sh(netns.in_ns("gw", ["tc", "qdisc", "del", "dev", dev, "root"]), check=False)
    netns.ip("gw", "link", "del", "br0", check=False)

"""Linux HTB in weir's place: the kernel baseline for the shaping experiments.

The gateway namespace bridges gw-lan and gw-wan (as the linux-bridge gateway) and
puts an HTB tree with pfifo leaves on each egress: gw-wan shapes outbound (LAN to
WAN) traffic, gw-lan inbound. A spec mirrors weir's class config:

    {"outbound": {"rate": "30mbit", "default": "bulk",
                  "classes": [{"name": "gold", "rate": "20mbit", "ceil": "30mbit",
                               "prio": 0, "wan_ports": [5201, 5204], "lan_ports": [6000, 6099],
                  "icmp": True}, ...]},
     "inbound": {...}, "limit": 1000}

Flows are put in a class by their WAN- or LAN-side TCP/UDP port ranges (u32
filters over aligned blocks) or as ICMP; unmatched ones go to the default class. Offloads are turned off on the bridge ports so HTB sees the frames
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
                "prio", str(c.get("prio", 0)), "quantum", "1514")
            _tc("qdisc", "add", "dev", dev, "parent", f"1:{cid}", "handle", f"{cid}:",
                "pfifo", "limit", limit)
            # The WAN side's port is the destination going out, the source
            # coming in; the LAN side's the other way round.
            out = direction == "outbound"
            for key, field in (("wan_ports", "dport" if out else "sport"),
                               ("lan_ports", "sport" if out else "dport")):
                if c.get(key):
                    for value, mask in port_blocks(*c[key]):
                        _tc("filter", "add", "dev", dev, "parent", "1:", "protocol", "ip",
                            "prio", "1", "u32", "match", "ip", field, str(value), hex(mask),
                            "flowid", f"1:{cid}")
            if c.get("icmp"):
                _tc("filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
                    "u32", "match", "ip", "protocol", "1", "0xff", "flowid", f"1:{cid}")
    return {d: {c["name"]: 10 + i for i, c in enumerate(spec[d].get("classes") or
                                                         [{"name": "default"}])}
            for d in DEV if spec.get(d)}


def port_blocks(lo, hi):
    """[lo, hi] as (value, mask) blocks u32 can match (aligned powers of two)."""
    out = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << 16
        while size > hi - lo + 1:
            size >>= 1
        out.append((lo, 0xffff & ~(size - 1)))
        lo += size
    return out


def leaf_stats(direction):
    """The pfifo leaves' counters of one direction, by leaf id (10, 11, ...):
    {"qlen": packets queued now, "drops", "bytes", "packets"}."""
    import json
    cp = netns.sh(netns.in_ns("gw", ["tc", "-s", "-j", "qdisc", "show", "dev", DEV[direction]]),
                  check=False)
    try:
        qd = json.loads(cp.stdout or "[]")
    except ValueError:
        return {}
    return {int(q["handle"].rstrip(":")): q for q in qd if q.get("kind") == "pfifo"}


def teardown():
    for dev in DEV.values():
        netns.sh(netns.in_ns("gw", ["tc", "qdisc", "del", "dev", dev, "root"]), check=False)
    netns.ip("gw", "link", "del", "br0", check=False)

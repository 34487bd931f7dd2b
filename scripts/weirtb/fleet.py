"""Two weir boxes between two LAN-side and two WAN-side routers (FRR: OSPF with BFD),
all in network namespaces: the fleet's failover testbed (docs/fleet.md).

    l1, l2 --+                                                 +-- srv
             | lsw (bridge)   rl1 =up= [weir A] =dn= rw1   wsw |
             +-- rl1, rl2     rl2 =up= [weir B] =dn= rw2  (bridge) -- rw1, rw2

- LAN 10.61.0.0/24: hosts l1 (.11) and l2 (.12), routers rl1 (.1, the hosts' gateway)
  and rl2 (.2). WAN 10.62.0.0/24: srv (.10, gateway rw1 .1) and rw2 (.2).
- Transit A 10.61.10.0/30 (rl1 .1 - rw1 .2) crosses weir A, transit B 10.61.20.0/30
  (rl2 .1 - rw2 .2) crosses weir B: weir is a bridge, the routers are neighbours
  through it. OSPF area 0 everywhere, point-to-point with BFD on the transits; transit
  A costs 10 (active), B 100 (standby). Both boxes carry every subscriber's plan.
- Each weir's management API listens on a veth to the host's namespace: box A at
  10.63.1.2:8080 (host side 10.63.1.1), box B at 10.63.2.2:8080.

Namespaces are `<WEIRTB_NS_PREFIX>fl-*`; FRR runs one zebra/ospfd/bfdd per router
with its own pathspace (-N) and config dir /etc/frr/<namespace>/.
"""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from . import netns
from .netns import sh, ip, ns_name
from .topology import STATE_DIR, build_dir

HOSTS = {"l1": "10.61.0.11", "l2": "10.61.0.12", "srv": "10.62.0.10"}
ROUTERS = ("rl1", "rl2", "rw1", "rw2")
BOXES = ("a", "b")
FRR_DIR = Path("/usr/lib/frr")
# Per box: (LAN router, WAN router, transit /30 prefix, OSPF cost, mgmt /30 prefix).
BOX = {"a": ("rl1", "rw1", "10.61.10", 10, "10.63.1"),
       "b": ("rl2", "rw2", "10.61.20", 100, "10.63.2")}
# Plans: per subscriber (LAN host) a class with rate = ceil, both directions.
PLANS = {"l1": 20_000_000, "l2": 10_000_000}
LINK = "100mbit"


def ns(name):
    return ns_name("fl-" + name)


def frr_missing():
    """Why FRR cannot run here ('' if it can)."""
    for d in ("zebra", "ospfd", "bfdd"):
        if not os.access(FRR_DIR / d, os.X_OK):
            return f"{FRR_DIR / d} missing (apt-get install frr)"
    if shutil.which("vtysh") is None:
        return "vtysh missing (apt-get install frr)"
    return ""


def weir_cfg(box, state, on_failure="closed", l3_control=True, extra=""):
    lr, wr, _, _, mnet = BOX[box]
    classes = ",\n".join(
        f'      {{ name = "{h}"; rate = "{r}"; ceil = "{r}"; prio = 1; }}'
        for h, r in PLANS.items())
    tree = (f'{{\n    rate = "{LINK}";\n    default = "other";\n    classes = (\n{classes},\n'
            f'      {{ name = "other"; rate = "10mbit"; ceil = "{LINK}"; prio = 2; }}\n    );\n  }}')
    rules = ",\n".join(f'  {{ class = "{h}"; lan = "{HOSTS[h]}/32"; }}' for h in PLANS)
    dev = "blocksz=4096,framesz=2048,framecnt=2048,qdisc_bypass=1"
    return f"""# weir box {box} of the fleet testbed (scripts/weirtb/fleet.py)
eal = ["--no-huge", "-m", "512", "--no-pci", "--file-prefix=weir-{netns.PREFIX}fleet-{box}",
       "--log-level=notice"];
log_level = "notice";
lcores = {{ management = 0; workers = [1]; }};
ports = {{
  on_failure = "{on_failure}";
  lan = {{ device = "net_af_packet0,iface=lan,{dev}"; }};
  wan = {{ device = "net_af_packet1,iface=wan,{dev}"; }};
}};
mempool = {{ mbufs = 16383; cache = 256; }};
worker = {{ burst = 32; idle_sleep_us = 50; l3_control = {str(l3_control).lower()}; }};
flows = {{ capacity = 16384; }};
shaping = {{
  burst_us = 5000;
  outbound = {tree};
  inbound = {tree};
}};
rules = (
{rules}
);
management = {{ listen = "{mnet}.2"; port = 8080; }};
stats = {{ interval = 0.5; file = "{state}/weir-{box}-stats.json"; }};
{extra}"""


def frr_cfg(router):
    """OSPF (and BFD on the transit links) for one router."""
    rid = {"rl1": "1.1.1.1", "rl2": "2.2.2.2", "rw1": "3.3.3.3", "rw2": "4.4.4.4"}[router]
    out = [f"frr defaults traditional", f"hostname {router}", "log stdout notifications", "!",
           "bfd", " profile fast", "  detect-multiplier 3", "  receive-interval 100",
           "  transmit-interval 100", " !", "!"]
    for box, (lr, wr, _, cost, _) in BOX.items():
        if router in (lr, wr):
            out += ["interface transit", " ip ospf area 0", " ip ospf network point-to-point",
                    " ip ospf hello-interval 1", " ip ospf dead-interval 3",
                    f" ip ospf cost {cost}", " ip ospf bfd", " ip ospf bfd profile fast", "!"]
    seg = "lan" if router.startswith("rl") else "wan"
    out += [f"interface {seg}", " ip ospf area 0", " ip ospf network point-to-point",
            " ip ospf hello-interval 1",
            " ip ospf dead-interval 3", " ip ospf cost 1", "!",
            "router ospf", f" ospf router-id {rid}",
            # Fast convergence, as an operator tunes it for sub-second failover: SPF at
            # once, LSAs originated and accepted without OSPF's default 5 s / 1 s floors
            # (a new adjacency's LSA would otherwise wait out the one before it).
            " timers throttle spf 0 50 1000", " timers throttle lsa all 50",
            " timers lsa min-arrival 50", "!"]
    return "\n".join(out) + "\n"


class FleetError(RuntimeError):
    pass


class Fleet:
    """Bring the fleet testbed up, kill and restart boxes, tear it down."""

    def __init__(self, on_failure="closed", l3_control=True, weir_extra=""):
        self.on_failure, self.l3_control, self.weir_extra = on_failure, l3_control, weir_extra
        self.state = STATE_DIR / "fleet"
        self.procs = {}
        self.weir_exits = []

    # ----- life cycle -----------------------------------------------------
    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()
        return False

    def up(self, converge_timeout=40):
        why = frr_missing()
        if why:
            raise FleetError(why)
        self.down()
        self.state.mkdir(parents=True, exist_ok=True)
        try:
            self._topology()
            for b in BOXES:
                self.start_weir(b)
            for r in ROUTERS:
                self._start_frr(r)
            self.wait_converged(converge_timeout)
        except BaseException:
            self.down()
            raise
        return self

    def down(self):
        for b in list(self.procs):
            self.stop_weir(b)
        for n in netns.list_ns():
            if n.startswith(ns_name("fl-")):
                netns.del_ns(n)
        for b in BOXES:
            sh(["ip", "link", "del", f"{netns.PREFIX}m{b}"], check=False)
        for r in ROUTERS:
            for d in (Path("/etc/frr") / ns(r), Path("/var/run/frr") / ns(r)):
                shutil.rmtree(d, ignore_errors=True)

    def _topology(self):
        for n in list(HOSTS) + list(ROUTERS) + ["lsw", "wsw", "wa", "wb"]:
            netns.add_ns(ns(n))
        ports = {"lsw": [], "wsw": []}
        for h, addr in HOSTS.items():
            sw = "wsw" if h == "srv" else "lsw"
            netns.veth(ns(h), "eth0", ns(sw), f"p-{h}")
            ports[sw].append(f"p-{h}")
            ip(ns(h), "addr", "add", f"{addr}/24", "dev", "eth0")
            gw = "10.62.0.1" if h == "srv" else "10.61.0.1"
            ip(ns(h), "route", "add", "default", "via", gw)
        for r in ROUTERS:
            seg, sw = ("lan", "lsw") if r.startswith("rl") else ("wan", "wsw")
            netns.veth(ns(r), seg, ns(sw), f"p-{r}")
            ports[sw].append(f"p-{r}")
            net = "10.61.0" if seg == "lan" else "10.62.0"
            ip(ns(r), "addr", "add", f"{net}.{r[-1]}/24", "dev", seg)
            netns.sysctl(ns(r), "net.ipv4.ip_forward", "1")
        for sw in ("lsw", "wsw"):
            netns.bridge(ns(sw), "br0", ports[sw])
        for b, (lr, wr, tnet, _, mnet) in BOX.items():
            w = ns("w" + b)
            netns.veth(ns(lr), "transit", w, "lan")
            netns.veth(w, "wan", ns(wr), "transit")
            for d in ("lan", "wan"):
                netns.no_ipv6(w, d)
            ip(ns(lr), "addr", "add", f"{tnet}.1/30", "dev", "transit")
            ip(ns(wr), "addr", "add", f"{tnet}.2/30", "dev", "transit")
            # The box's management link to the host's namespace.
            host_if = f"{netns.PREFIX}m{b}"
            sh(["ip", "link", "add", host_if, "type", "veth", "peer", "name", "mgmt",
                "netns", w])
            sh(["ip", "addr", "add", f"{mnet}.1/30", "dev", host_if])
            sh(["ip", "link", "set", host_if, "up"])
            ip(w, "addr", "add", f"{mnet}.2/30", "dev", "mgmt")
            ip(w, "link", "set", "mgmt", "up")

    def _start_frr(self, r):
        name = ns(r)
        conf_dir, run_dir = Path("/etc/frr") / name, Path("/var/run/frr") / name
        for d in (conf_dir, run_dir):
            d.mkdir(parents=True, exist_ok=True)
            shutil.chown(d, "frr", "frr")
        (conf_dir / "frr.conf").write_text(frr_cfg(r))
        (conf_dir / "vtysh.conf").write_text("")
        for f in ("frr.conf", "vtysh.conf"):
            shutil.chown(conf_dir / f, "frr", "frr")
        for d in ("zebra", "bfdd", "ospfd"):
            sh(netns.in_ns(name, [str(FRR_DIR / d), "-N", name, "-d", "-f",
                                  str(conf_dir / "frr.conf"), "-i", str(run_dir / f"{d}.pid")]),
               timeout=30)

    # ----- weir boxes -------------------------------------------------------
    def cfg_path(self, box):
        return self.state / f"weir-{box}.cfg"

    def start_weir(self, box, wait=True):
        cfg = self.cfg_path(box)
        cfg.write_text(weir_cfg(box, self.state, self.on_failure, self.l3_control,
                                self.weir_extra))
        log = open(self.state / f"weir-{box}.log", "ab")
        # The ports' links come up with weir (a fail-closed stop left them down).
        for d in ("lan", "wan"):
            ip(ns("w" + box), "link", "set", d, "up")
        p = subprocess.Popen(netns.in_ns(ns("w" + box), [str(build_dir() / "app/weir/weir"),
                                                         "--", "--config", str(cfg)]),
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        log.close()
        self.procs[box] = p
        if wait:
            self.wait_api(box)
        return p

    def url(self, box):
        return f"http://{BOX[box][4]}.2:8080"

    def wait_api(self, box, timeout=30):
        import urllib.request
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            p = self.procs.get(box)
            if p is not None and p.poll() is not None:
                raise FleetError(f"weir {box} exited {p.returncode}\n" + self.log_tail(box))
            try:
                with urllib.request.urlopen(self.url(box) + "/api/v1/status", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise FleetError(f"weir {box}'s API did not come up\n" + self.log_tail(box))

    def kill_weir(self, box, sig=signal.SIGKILL):
        """Signal weir `box`; returns time.monotonic() at the signal."""
        p = self.procs.pop(box)
        t = time.monotonic()
        p.send_signal(sig)
        p.wait(30)
        self.weir_exits.append((box, sig, p.returncode))
        return t

    def stop_weir(self, box, timeout=30):
        p = self.procs.pop(box, None)
        if p is None:
            return None
        netns.terminate(p, timeout)
        self.weir_exits.append((box, signal.SIGTERM, p.returncode))
        return p.returncode

    def hook(self, box, action):
        """dist/weir-failopen as the unit runs it, inside the box's namespace."""
        hook = Path(__file__).resolve().parents[2] / "dist" / "weir-failopen"
        return sh(netns.in_ns(ns("w" + box), [str(hook), action, str(self.cfg_path(box))]))

    def links(self, box):
        """{'lan': bool, 'wan': bool}: each port's link administratively up."""
        out = {}
        for d in ("lan", "wan"):
            j = json.loads(ip(ns("w" + box), "-j", "link", "show", "dev", d).stdout)[0]
            out[d] = "UP" in j.get("flags", [])
        return out

    def stats(self, box):
        for _ in range(30):
            try:
                return json.loads((self.state / f"weir-{box}-stats.json").read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                time.sleep(0.1)
        raise FleetError(f"no stats from weir {box}")

    def log_tail(self, box, n=30):
        try:
            lines = (self.state / f"weir-{box}.log").read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return f"(weir {box}: no log)"
        return "\n".join(lines[-n:])

    # ----- routing ------------------------------------------------------------
    def vtysh(self, r, *cmds):
        argv = ["vtysh", "-N", ns(r)]
        for c in cmds:
            argv += ["-c", c]
        return sh(netns.in_ns(ns(r), argv), check=False, timeout=20).stdout

    def next_hop(self, r, prefix):
        """The kernel's next hop at router r towards prefix ('' if none)."""
        out = ip(ns(r), "-j", "route", "show", prefix).stdout
        routes = json.loads(out or "[]")
        return routes[0].get("gateway", "") if routes else ""

    def active_box(self):
        """'a' or 'b': the box both directions' routes cross now, None when they disagree."""
        up = {"10.61.10.2": "a", "10.61.0.2": "b"}.get(self.next_hop("rl1", "10.62.0.0/24"))
        down = {"10.61.10.1": "a", "10.62.0.2": "b"}.get(self.next_hop("rw1", "10.61.0.0/24"))
        return up if up == down else None

    def link_known(self, r, a, b):
        """r's link-state database holds the p2p link between routers a and b, both ways
        (router ids: the routers' last digit a..d as 1.1.1.1..4.4.4.4)."""
        rid = {"rl1": "1.1.1.1", "rl2": "2.2.2.2", "rw1": "3.3.3.3", "rw2": "4.4.4.4"}
        for x, y in ((a, b), (b, a)):
            out = self.vtysh(r, f"show ip ospf database router {rid[x]}")
            if f"Neighboring Router ID: {rid[y]}" not in out:
                return False
        return True

    def wait_converged(self, timeout=40, box="a"):
        """Until routes cross `box`, both transits' BFD sessions are up and every router
        knows both transits (so the standby path is ready before anything fails)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.active_box() == box and self.bfd_up("rl1") and self.bfd_up("rl2") and \
                    all(self.link_known(r, lr, wr) for r in ("rl1", "rw1")
                        for lr, wr, *_ in BOX.values()):
                return time.monotonic()
            for b, p in self.procs.items():
                if p.poll() is not None:
                    raise FleetError(f"weir {b} exited {p.returncode}\n" + self.log_tail(b))
            time.sleep(0.2)
        raise FleetError(f"routes did not converge through box {box} in {timeout}s:\n" +
                         self.vtysh("rl1", "show ip ospf neighbor", "show bfd peers brief",
                                    "show ip route"))

    def bfd_up(self, r):
        out = self.vtysh(r, "show bfd peers brief")
        return " up" in out and "down" not in out

    def run(self, host, argv, **kw):
        return sh(netns.in_ns(ns(host), argv), **kw)

    def popen(self, host, argv, **kw):
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("text", True)
        return subprocess.Popen(netns.in_ns(ns(host), argv), **kw)

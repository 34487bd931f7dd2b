"""The virtual testbed: namespaces, veths, bridges, weir and the WAN emulator.

    wtb-l1..lN --eth0/lan-pI-- br0 (wtb-lan) --lan-up/gw-lan-- wtb-gw --gw-wan/emu-weir--
        wtb-emu (weir-wanemu or a bridge) --emu-pJ/eth0-- wtb-w1..wM

With lan_paths (one PathSpec per LAN host: the senders' access links), wtb-lan
runs a second weir-wanemu instead of br0 (role "lanemu": lan-up faces weir,
lan-pI is host I's path); LAN hosts then reach weir only, not each other.

LAN and WAN hosts share one L2 segment (10.77.0.0/16, fd77::/64); everything
between them is a bridge, so weir and the emulator see real Ethernet frames.
State (pids, mode, log files) lives in STATE_DIR so `down` can clean up after
a crashed run or after another process brought the testbed up.
"""

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, asdict
from pathlib import Path

from . import htb, netns
from .netns import sh, ip, ns_name

REPO = Path(__file__).resolve().parents[2]
# One per WEIRTB_NS_PREFIX: two testbeds sharing it would read each other's
# stats and stop each other's processes.
STATE_DIR = Path(os.environ.get("WEIRTB_STATE_DIR") or
                 ("/run/weirtb" if netns.PREFIX == "wtb-" else f"/run/weirtb-{netns.PREFIX.rstrip('-')}"))
STATE_FILE = STATE_DIR / "state.json"

GATEWAYS = ("weir", "linux-bridge", "linux-htb")
EMULATORS = ("wanemu", "bridge")

# One-way delays of the paper's three WAN paths (10, 50, 150 ms RTT).
PAPER_DELAYS_MS = (5, 25, 75)

VLAN_ID = 100


def build_dir():
    return Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build"))


def weir_binary():
    return build_dir() / "app" / "weir" / "weir"


def wanemu_binary():
    return build_dir() / "app" / "wanemu" / "weir-wanemu"


def weir_config():
    return Path(os.environ.get("WEIR_TESTBED_CFG", REPO / "conf" / "testbed.cfg"))


@dataclass
class PathSpec:
    """One emulated WAN path, in weir-wanemu's terms (delay/jitter in ms one
    way, loss in percent, ploss = drop every Nth, rate like '10mbit', 0 = none)."""
    delay: float = 0
    jitter: float = 0
    loss: float = 0
    ploss: int = 0
    rate: str = "0"
    limit: int = 1000
    sched: str = ""         # wanemu's sched= (steps:... or sine:...), instead of rate
    sched_dir: str = "both"
    loss_dir: str = "both"  # wanemu's loss_dir= (to_path, to_weir: loss on one side of weir)
    corrupt: int = 0        # wanemu's corrupt= (one bit error per N bytes), 0 = off

    def arg(self, dev):
        d = asdict(self)
        if self.loss_dir == "both":
            del d["loss_dir"]
        if not self.corrupt:
            del d["corrupt"]
        if not self.sched:
            del d["sched"], d["sched_dir"]
        else:
            del d["rate"]
        fields = ",".join(f"{k}={_fmt(v)}" for k, v in d.items())
        return f"{dev},{fields}"


def _fmt(v):
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def paper_paths(m, **kw):
    return [PathSpec(delay=PAPER_DELAYS_MS[i % len(PAPER_DELAYS_MS)], **kw) for i in range(m)]


class TestbedError(RuntimeError):
    pass


class Testbed:
    """Bring the topology up, run things in it, tear it down.

    Use as a context manager; `down()` is also safe to call on a testbed some
    other (possibly dead) process built.
    """

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, lan=2, wan=3, gateway="weir", emu="wanemu", paths=None, seed=1,
                 core=None, lan_paths=None):
        if gateway not in GATEWAYS:
            raise ValueError(f"gateway must be one of {GATEWAYS}")
        if emu not in EMULATORS:
            raise ValueError(f"emu must be one of {EMULATORS}")
        if not 1 <= lan <= 250 or not 1 <= wan <= 250:
            raise ValueError("lan and wan host counts must be 1..250")
        self.nlan, self.nwan = lan, wan
        self.gateway, self.emu = gateway, emu
        self.paths = list(paths) if paths is not None else paper_paths(wan)
        if len(self.paths) != wan:
            raise ValueError("need one PathSpec per WAN host")
        self.lan_paths = list(lan_paths) if lan_paths is not None else None
        if self.lan_paths is not None and len(self.lan_paths) != lan:
            raise ValueError("need one PathSpec per LAN host")
        self.seed = seed
        # weir-wanemu --core options (e.g. "rate=15mbit,limit=120,rio=..."): one
        # link every frame from weir crosses before its path; None = none.
        self.core = core
        self._procs = {}  # role -> Popen (only for processes this object started)
        # (exit code, log tail) of every weir this object stopped with SIGTERM,
        # restarts included: the fixtures assert each is 0 (issue 16.8: 3 =
        # mbufs not back in the pool).
        self.weir_exits = []
        self.gateway_running = None
        self.has_vlan_if = False

    # ----- names and addresses -------------------------------------------
    @property
    def lan_hosts(self):
        return [f"l{i}" for i in range(1, self.nlan + 1)]

    @property
    def wan_hosts(self):
        return [f"w{i}" for i in range(1, self.nwan + 1)]

    @staticmethod
    def addr(host, v6=False, vlan=False):
        """Address of a host by name ('l2', 'w1'); vlan=True gives the VLAN-100 one."""
        side, idx = host[0], int(host[1:])
        if vlan:
            if host not in ("l1", "w1"):
                raise ValueError("only l1 and w1 have a VLAN 100 interface")
            return "10.78.0.1" if side == "l" else "10.78.0.2"
        n = {"l": 1, "w": 2}[side]
        return f"fd77::{n}:{idx}" if v6 else f"10.77.{n}.{idx}"

    # ----- life cycle ----------------------------------------------------
    def __enter__(self):
        self.claim().up()
        return self

    def __exit__(self, *exc):
        self.down()
        return False

    def check_prerequisites(self):
        """Reasons this testbed cannot run here (empty list: it can)."""
        why = []
        if os.geteuid() != 0:
            why.append("needs root (network namespaces)")
        for tool in ("ip", "ethtool", "iperf3", "ping"):
            if sh(["which", tool], check=False).returncode != 0:
                why.append(f"{tool} not installed")
        if self.gateway == "weir":
            if not os.access(weir_binary(), os.X_OK):
                why.append(f"weir binary missing: {weir_binary()} (set WEIR_BUILD_DIR)")
            if not weir_config().is_file():
                why.append(f"weir testbed config missing: {weir_config()}")
        if (self.emu == "wanemu" or self.lan_paths) and not os.access(wanemu_binary(), os.X_OK):
            why.append(f"WAN emulator missing: {wanemu_binary()} (set WEIR_BUILD_DIR)")
        return why

    def up(self, wait=True):
        why = self.check_prerequisites()
        if why:
            raise TestbedError("; ".join(why))
        _refuse_if_owned_by_other()
        down()  # leftovers of a crashed run
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self._save_state()
        try:
            self._build_topology()
            self._start_emulator()
            self.start_gateway(self.gateway, wait=wait)
        except BaseException:
            self.down()
            raise
        return self

    def down(self):
        for role in list(self._procs):
            self._stop_proc(role)
        down()
        self.gateway_running = None

    def _build_topology(self):
        for ns in ["lan", "gw", "emu"] + self.lan_hosts + self.wan_hosts:
            netns.add_ns(ns)
        # LAN side: hosts -> br0 in wtb-lan -> lan-up == gw-lan
        ports = []
        for i, h in enumerate(self.lan_hosts, 1):
            netns.veth(h, "eth0", "lan", f"lan-p{i}")
            ports.append(f"lan-p{i}")
        netns.veth("lan", "lan-up", "gw", "gw-lan")
        for p in ports + ["lan-up"]:
            netns.no_ipv6("lan", p)
        if self.lan_paths is None:
            netns.bridge("lan", "br0", ports + ["lan-up"])
        # WAN side: gw-wan == emu-weir, emu-pJ == eth0 of wtb-wJ
        netns.veth("gw", "gw-wan", "emu", "emu-weir")
        for d in ("gw-lan", "gw-wan"):
            netns.no_ipv6("gw", d)
        netns.no_ipv6("emu", "emu-weir")
        for j, h in enumerate(self.wan_hosts, 1):
            netns.veth(h, "eth0", "emu", f"emu-p{j}")
            netns.no_ipv6("emu", f"emu-p{j}")
        for h in self.lan_hosts + self.wan_hosts:
            ip(h, "addr", "add", f"{self.addr(h)}/16", "dev", "eth0")
            ip(h, "-6", "addr", "add", f"{self.addr(h, v6=True)}/64", "dev", "eth0", "nodad")
        self.has_vlan_if = self._add_vlan_interfaces()

    def _add_vlan_interfaces(self):
        """eth0.100 on l1 and w1, if the kernel has 802.1Q support (the CI
        kernel is built without it; traffic.vlan_frames then tests tagged
        frames with raw sockets instead)."""
        if "w1" not in self.wan_hosts:
            return False
        for h in ("l1", "w1"):
            cp = ip(h, "link", "add", "link", "eth0", "name", f"eth0.{VLAN_ID}", "type", "vlan",
                    "id", str(VLAN_ID), check=False)
            if cp.returncode != 0:
                if "Unknown device type" in cp.stderr:
                    return False
                raise netns.CommandError(f"creating eth0.{VLAN_ID} in {h}: {cp.stderr.strip()}")
            netns.sysctl(h, f"net.ipv6.conf.eth0/{VLAN_ID}.disable_ipv6", "1")
            ip(h, "addr", "add", f"{self.addr(h, vlan=True)}/16", "dev", f"eth0.{VLAN_ID}")
            ip(h, "link", "set", f"eth0.{VLAN_ID}", "up")
        return True

    def _start_emulator(self):
        if self.lan_paths is not None:
            self._start_wanemu("lanemu", "lan", "lan-up",
                               [p.arg(f"lan-p{i}") for i, p in enumerate(self.lan_paths, 1)])
        if self.emu == "bridge":
            netns.bridge("emu", "br0", ["emu-weir"] + [f"emu-p{j}" for j in range(1, self.nwan + 1)])
            return
        self._start_wanemu("wanemu", "emu", "emu-weir",
                           [p.arg(f"emu-p{j}") for j, p in enumerate(self.paths, 1)], self.core)

    def _start_wanemu(self, role, ns, weir_if, path_args, core=None):
        argv = [str(wanemu_binary()), "--weir", weir_if]
        for a in path_args:
            argv += ["--path", a]
        if core:
            argv += ["--core", core]
        argv += ["--seed", str(self.seed), "--stats", str(STATE_DIR / f"{role}-stats.json"),
                 "--stats-interval", "1"]
        self._spawn(role, ns, argv)
        time.sleep(0.3)
        self._check_alive(role)

    def start_gateway(self, mode, wait=True, htb_spec=None):
        """Put `mode` ('weir', 'linux-bridge' or 'linux-htb' with htb_spec, see
        weirtb/htb.py) between gw-lan and gw-wan."""
        if self.gateway_running:
            self.stop_gateway()
        if mode == "linux-bridge":
            netns.bridge("gw", "br0", ["gw-lan", "gw-wan"])
        elif mode == "linux-htb":
            htb.setup(htb_spec or {})
        elif mode == "weir":
            stats = self.weir_stats_path
            if stats.exists():
                stats.unlink()
            # The EAL file prefix follows the namespace prefix: two testbeds' weirs
            # are two DPDK primaries (a command-line EAL arg wins over the config's).
            argv = [str(weir_binary()), f"--file-prefix=weir-{netns.PREFIX.rstrip('-')}",
                    "--", "--config", str(weir_config()),
                    "--stats-file", str(stats)]
            self._spawn("weir", "gw", argv)
            self._wait_for(lambda: stats.exists(), 20, "weir to write its stats file", "weir")
        else:
            raise ValueError(f"unknown gateway {mode}")
        self.gateway_running = mode
        self._save_state()
        if wait:
            self.wait_connected()

    def stop_gateway(self, timeout=10.0):
        """Remove the gateway; for weir, SIGTERM it and return its exit code."""
        mode, self.gateway_running = self.gateway_running, None
        if mode == "linux-bridge":
            ip("gw", "link", "del", "br0", check=False)
        elif mode == "linux-htb":
            htb.teardown()
        elif mode == "weir":
            return self._stop_proc("weir", timeout)
        return None

    def wait_connected(self, timeout=20.0):
        """Until a LAN host reaches the first WAN host (ARP + ICMP through
        gateway and emulator); raises with the gateway's log tail otherwise."""
        dst = self.addr("w1")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for role in self._procs:
                self._check_alive(role)
            if self.run("l1", ["ping", "-c", "1", "-W", "1", dst], check=False).returncode == 0:
                return
        raise TestbedError(f"l1 cannot reach w1 ({dst}) within {timeout}s\n" + self._log_tails())

    # ----- processes -------------------------------------------------------
    def _spawn(self, role, ns, argv):
        log = open(STATE_DIR / f"{role}.log", "wb")
        p = subprocess.Popen(netns.in_ns(ns, argv), stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self._procs[role] = p
        self._save_state()
        return p

    def _stop_proc(self, role, timeout=10.0):
        p = self._procs.pop(role, None)
        if p is None:
            return None
        if p.poll() is None:
            netns.terminate(p, timeout)
            if role == "weir":
                self.weir_exits.append((p.returncode, self.log_tail("weir", 40)))
        self._save_state()
        return p.returncode

    def bad_weir_exits(self):
        """The (exit code, log tail) of each weir stopped so far that did not exit 0."""
        return [e for e in self.weir_exits if e[0] != 0]

    def signal_gateway(self, sig):
        """Send weir a signal (SIGHUP: reload its policy)."""
        p = self._procs.get("weir")
        if p is None or p.poll() is not None:
            raise TestbedError("weir is not running\n" + self.log_tail("weir"))
        p.send_signal(sig)

    def _check_alive(self, role):
        p = self._procs.get(role)
        if p is not None and p.poll() is not None:
            raise TestbedError(f"{role} exited with {p.returncode}\n" + self.log_tail(role))

    def _wait_for(self, cond, timeout, what, role):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive(role)
            if cond():
                return
            time.sleep(0.1)
        raise TestbedError(f"timed out waiting for {what}\n" + self.log_tail(role))

    def log_tail(self, role, lines=30):
        try:
            text = (STATE_DIR / f"{role}.log").read_text(errors="replace")
        except FileNotFoundError:
            return f"({role}: no log)"
        return f"--- {role}.log (tail) ---\n" + "\n".join(text.splitlines()[-lines:])

    def _log_tails(self):
        return "\n".join(self.log_tail(r) for r in ("weir", "wanemu", "lanemu") if (STATE_DIR / f"{r}.log").exists())

    def _save_state(self):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        state = {
            "owner_pid": self.owner_pid,
            "lan": self.nlan, "wan": self.nwan, "gateway": self.gateway_running or self.gateway,
            "emu": self.emu, "vlan_if": self.has_vlan_if, "paths": [asdict(p) for p in self.paths],
            "lan_paths": [asdict(p) for p in self.lan_paths] if self.lan_paths else None,
            # p.args is `ip netns exec NS PROGRAM ...`; exec keeps the pid.
            "procs": {r: {"pid": p.pid, "exe": p.args[4], "cmd": " ".join(p.args)}
                      for r, p in self._procs.items() if p.poll() is None},
        }
        tmp = STATE_FILE.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(STATE_FILE)

    # A CLI `up` leaves the testbed running after it exits, so it owns nothing;
    # a context manager or fixture owns it while its process lives.
    owner_pid = None

    def claim(self):
        self.owner_pid = os.getpid()
        return self

    # ----- using it --------------------------------------------------------
    def run(self, host, cmd, timeout=60, check=True, input=None):
        """Run cmd (list, or a string for sh -c) in host's namespace."""
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        return sh(netns.in_ns(host, argv), check=check, timeout=timeout, input=input)

    def popen(self, host, cmd, **kw):
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("text", True)
        return subprocess.Popen(netns.in_ns(host, argv), **kw)

    def set_cc(self, host, algo):
        """TCP congestion control for connections opened in host ('reno', 'cubic', 'bbr')."""
        allow_congestion_control(algo)
        netns.sysctl(host, "net.ipv4.tcp_congestion_control", algo)

    @property
    def weir_stats_path(self):
        return STATE_DIR / "weir-stats.json"

    def weir_stats(self, timeout=3.0):
        """weir's latest stats JSON; retries a torn read (weir rewrites it each second)."""
        return _read_json(self.weir_stats_path, timeout)

    def wanemu_stats(self, timeout=3.0, role="wanemu"):
        """The WAN emulator's stats (role="lanemu": the LAN access links')."""
        return _read_json(STATE_DIR / f"{role}-stats.json", timeout)

    def ping(self, src, dst, count=3, v6=False, interval=0.2, timeout=20):
        from .traffic import ping
        return ping(self, src, dst, count=count, v6=v6, interval=interval, timeout=timeout)

    def iperf(self, *args, **kw):
        from .traffic import iperf_flows
        return iperf_flows(self, *args, **kw)

    def bulk(self, *args, **kw):
        from .traffic import bulk_transfer
        return bulk_transfer(self, *args, **kw)


def allow_congestion_control(algo):
    """A namespace may only pick a congestion control from the host's
    tcp_allowed_congestion_control list (Debian's lists reno and bbr, not
    cubic). That list is global and writable only from the initial namespace,
    so add algo there; this widens what may be chosen, it changes no default."""
    key = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
    allowed = Path(key).read_text().split()
    if algo in allowed:
        return
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    if algo not in available:
        raise TestbedError(f"congestion control {algo} not available (have: {' '.join(available)})")
    Path(key).write_text(" ".join(allowed + [algo]))


def _read_json(path, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return json.loads(Path(path).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def read_state():
    try:
        return json.loads(STATE_FILE.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _refuse_if_owned_by_other():
    st = read_state()
    owner = st and st.get("owner_pid")
    if owner and owner != os.getpid() and netns.pid_alive(owner) and netns.list_ns():
        raise TestbedError(f"testbed in use by pid {owner} ({netns.pid_cmdline(owner)[:80]}); "
                           "`scripts/testbed down` forces it down")


def down():
    """Remove every wtb-* namespace and stop the processes a testbed started,
    whoever started them. Idempotent."""
    st = read_state() or {}
    for role, info in (st.get("procs") or {}).items():
        pid = info.get("pid")
        # Only kill a recorded pid if it still runs the recorded program
        # (pids are reused after a reboot or a long time).
        if pid and netns.pid_alive(pid) and info.get("exe") and \
                info["exe"] in netns.pid_cmdline(pid):
            netns.kill_wait(pid, signal.SIGTERM, timeout=5.0)
    for ns in netns.list_ns():
        netns.del_ns(ns)
    if STATE_FILE.exists():
        STATE_FILE.unlink()


def status():
    """What exists now: namespaces, recorded processes and whether they run."""
    st = read_state() or {}
    procs = {}
    for role, info in (st.get("procs") or {}).items():
        procs[role] = dict(info, alive=netns.pid_alive(info["pid"]))
    return {"namespaces": netns.list_ns(), "state": st, "procs": procs}

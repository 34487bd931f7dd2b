"""Thin wrappers around ip(8), ethtool and sysctl for network namespaces.

Everything the testbed does to the kernel goes through here, so a failing
command always raises with the command line and its stderr: a half-built
topology that fails silently is worse than one that stops loudly.
"""

import os
import signal
import subprocess
import time

# Every namespace of the testbed starts with this prefix; teardown deletes
# exactly these and nothing else (other engineers' namespaces share the host).
# WEIRTB_NS_PREFIX gives a second testbed its own set (say "wtb2-"), so two
# can run side by side; each then needs its own WEIRTB_STATE_DIR and lock.
PREFIX = os.environ.get("WEIRTB_NS_PREFIX", "wtb-")

# Offloads the kernel would otherwise use on veths: with them on, frames can be
# larger than the MTU (TSO/GSO/GRO) and carry partial checksums (tx/rx), which
# a DPDK af_packet port forwards as-is and the far end then drops. The VLAN
# offloads are off so a tag stays inside the frame data instead of skb
# metadata, which is what an L2 forwarder expects to see.
OFFLOADS_OFF = ["tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx", "off",
                "sg", "off", "txvlan", "off", "rxvlan", "off"]


class CommandError(RuntimeError):
    pass


def sh(argv, check=True, timeout=30, input=None):
    """Run argv, return CompletedProcess with text output."""
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input)
    except subprocess.TimeoutExpired as e:
        raise CommandError(f"timeout after {timeout}s: {' '.join(argv)}") from e
    if check and cp.returncode != 0:
        raise CommandError(f"{' '.join(argv)} -> rc {cp.returncode}: {cp.stderr.strip()}")
    return cp


def ns_name(host):
    """'l1' -> 'wtb-l1'; already-prefixed names pass through."""
    return host if host.startswith(PREFIX) else PREFIX + host


def in_ns(ns, argv):
    return ["ip", "netns", "exec", ns_name(ns)] + list(argv)


def ip(ns, *args, check=True):
    return sh(["ip", "-n", ns_name(ns)] + list(args), check=check)


def list_ns():
    """Names of the testbed's namespaces that exist now."""
    out = sh(["ip", "netns", "list"]).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n.startswith(PREFIX)]


def add_ns(ns):
    ns = ns_name(ns)
    sh(["ip", "netns", "add", ns])
    ip(ns, "link", "set", "lo", "up")
    # IPv6 duplicate address detection would keep new addresses "tentative"
    # for a second or more; tests want v6 to work as soon as `up` returns.
    sysctl(ns, "net.ipv6.conf.default.accept_dad", "0")
    sysctl(ns, "net.ipv6.conf.all.accept_dad", "0")


def sysctl(ns, key, value):
    sh(in_ns(ns, ["sysctl", "-q", "-w", f"{key}={value}"]))


def veth(ns_a, name_a, ns_b, name_b):
    """Create a veth pair directly in its two namespaces, offloads off, MTU 1500, up."""
    sh(["ip", "-n", ns_name(ns_a), "link", "add", "name", name_a, "mtu", "1500", "type", "veth",
        "peer", "name", name_b, "netns", ns_name(ns_b)])
    for ns, dev in ((ns_a, name_a), (ns_b, name_b)):
        sh(in_ns(ns, ["ethtool", "-K", dev] + OFFLOADS_OFF))
        ip(ns, "link", "set", dev, "mtu", "1500", "up")


def no_ipv6(ns, dev):
    """Silence a pure L2 port: no link-local address, no RS/MLD frames from it."""
    sysctl(ns, f"net.ipv6.conf.{dev}.disable_ipv6", "1")


def bridge(ns, name, ports):
    """A plain learning bridge: no STP (ports forward at once), no multicast
    snooping (so IPv6 neighbour discovery is flooded like ARP)."""
    ip(ns, "link", "add", "name", name, "type", "bridge", "stp_state", "0",
       "forward_delay", "0", "mcast_snooping", "0")
    no_ipv6(ns, name)
    for p in ports:
        ip(ns, "link", "set", p, "master", name)
    ip(ns, "link", "set", name, "up")


def ns_pids(ns):
    cp = sh(["ip", "netns", "pids", ns_name(ns)], check=False)
    return [int(p) for p in cp.stdout.split() if p.strip().isdigit()]


def terminate(p, timeout=10.0):
    """Stop a child Popen p: SIGTERM, then SIGKILL after timeout. Returns its exit code."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def kill_wait(pid, sig=signal.SIGTERM, timeout=5.0):
    """Signal pid and wait until it is gone; escalate to SIGKILL after timeout.
    Returns True if the process existed."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            # A zombie has exited; only its parent's wait() is missing.
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def pid_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except FileNotFoundError:
        return ""


def del_ns(ns):
    """Kill whatever still runs inside ns, then delete it (its veths go with it)."""
    for pid in ns_pids(ns):
        kill_wait(pid, signal.SIGKILL, timeout=2.0)
    sh(["ip", "netns", "del", ns_name(ns)], check=False)

"""A user-space IPsec ESP tunnel between two testbed hosts (test/esptun/esptun.c:
AES-128-CBC + HMAC-SHA-256-128, tunnel mode over IPv4), since this kernel has no ESP
transform. Each end has a TUN device `esp0` with an inner address, so real TCP between the
inner addresses crosses weir as ESP only.

    with EspTunnel(tb, "l1", "w1", drop_every=(50, 0)) as t:
        r = tb.bulk("l1", "w1", addr=t.inner["w1"], nbytes=4_000_000)
        ...
    t.stats["l1"]     # the tunnel program's counters: tx, dropped, rx_ok, auth_fail, ...
"""

import json
import os
import signal
import time

from .topology import build_dir

SPI = {0: 0x00001001, 1: 0x00002002}           # the SA each end sends on
INNER = {0: "10.99.0.1", 1: "10.99.0.2"}
# Fixed test keys (16 bytes AES, 16 bytes HMAC): this tunnel protects nothing.
KEY = "000102030405060708090a0b0c0d0e0f" + "f0e1d2c3b4a5968778695a4b3c2d1e0f"


def esptun_binary():
    return build_dir() / "test" / "esptun" / "weir-esptun"


class EspTunnel:
    def __init__(self, tb, a, b, drop_every=(0, 0), mtu=1400, statedir="/tmp"):
        self.tb, self.hosts, self.drop, self.mtu = tb, (a, b), drop_every, mtu
        self.inner = {a: INNER[0], b: INNER[1]}
        self.spi = {a: SPI[0], b: SPI[1]}
        self.statfile = {h: os.path.join(statedir, f"esptun-{os.getpid()}-{h}.json") for h in (a, b)}
        self.procs, self.stats = {}, {}

    def __enter__(self):
        for i, h in enumerate(self.hosts):
            peer = self.hosts[1 - i]
            p = self.tb.popen(h, [str(esptun_binary()), "--tun", "esp0",
                                  "--local", self.tb.addr(h), "--remote", self.tb.addr(peer),
                                  "--spi-out", str(SPI[i]), "--spi-in", str(SPI[1 - i]),
                                  "--key", KEY, "--drop-every", str(self.drop[i]),
                                  "--stats", self.statfile[h]])
            self.procs[h] = p
            line = p.stdout.readline().strip()
            if line != "READY":
                self.__exit__(None, None, None)
                raise RuntimeError(f"esptun on {h}: {line} {p.stderr.read()[-300:]}")
            self.tb.run(h, f"ip addr add {INNER[i]}/30 dev esp0 && "
                           f"ip link set esp0 mtu {self.mtu} up")
        return self

    def read_stats(self):
        for h, f in self.statfile.items():
            with open(f) as fh:
                self.stats[h] = json.load(fh)
        return self.stats

    def __exit__(self, *exc):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.communicate(timeout=10)
            except Exception:
                p.kill()
                p.communicate()
        try:
            self.read_stats()
        except (OSError, ValueError):
            pass
        for f in self.statfile.values():
            try:
                os.unlink(f)
            except OSError:
                pass
        return False


def sa_name(tb, src, dst, spi):
    """The key weir's stats list an SA under (app/weir/ipsec.h)."""
    return f"{tb.addr(src)}>{tb.addr(dst)} 0x{spi:08x}"


def wait_stats_settle(tb, key_fn, timeout=5.0):
    """weir's stats file is rewritten every interval: wait until key_fn(stats) stops
    changing between two reads, and return the last stats."""
    last, deadline = None, time.time() + timeout
    while time.time() < deadline:
        s = tb.weir_stats()
        v = key_fn(s)
        if v == last:
            return s
        last = v
        time.sleep(1.1)
    return tb.weir_stats()

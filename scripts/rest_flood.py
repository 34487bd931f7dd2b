#!/usr/bin/env python3
"""A local connection flood against weir's REST API, and how long a good client waits.

N sockets from one source address (127.0.0.1 by default: the one address weir does not limit
per client) connect and send nothing; each one weir closes is reopened at once. Meanwhile a
good client on 127.0.0.1 sends GET /api/v1/status every 0.2 s and times each answer. Prints
the worst and median latency. Traffic goes to 127.0.0.1 only; the flood stops by itself.

    scripts/rest_flood.py --port 8080 [--sockets 500] [--seconds 4] [--warmup 3]
"""
import argparse
import http.client
import selectors
import socket
import threading
import time


class Flood:
    """n idle sockets from `source` to 127.0.0.1:port, each reopened as soon as it closes."""

    def __init__(self, port, n=500, source="127.0.0.1"):
        self.port, self.n, self.source = port, n, source
        self.reopened = 0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def open(self, sel):
        s = socket.socket()
        s.setblocking(False)
        s.bind((self.source, 0))
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            return False
        sel.register(s, selectors.EVENT_READ)
        return True

    def run(self):
        sel = selectors.DefaultSelector()
        for _ in range(self.n):
            self.open(sel)
        while not self.stop.is_set():
            for key, _ in sel.select(timeout=0.01):
                s = key.fileobj
                try:
                    if s.recv(4096) != b"":
                        continue
                except BlockingIOError:
                    continue
                except OSError:
                    pass
                sel.unregister(s)
                s.close()
                self.reopened += 1
                self.open(sel)
            # Sockets whose connect failed outright are retried here.
            for _ in range(self.n - len(sel.get_map())):
                self.open(sel)
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        sel.close()

    def close(self):
        self.stop.set()
        self.t.join()


def good_client(port, seconds=4.0, timeout=5.0):
    """GET /api/v1/status on a new connection every 0.2 s for `seconds`: [(latency, status)]."""
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            c.request("GET", "/api/v1/status")
            r = c.getresponse()
            r.read()
            status = r.status
        except OSError as e:
            status = repr(e)
        finally:
            c.close()
        out.append((time.monotonic() - t0, status))
        time.sleep(0.2)
    return out


def measure(port, sockets=500, seconds=4.0, warmup=3.0, source="127.0.0.1"):
    """The flood for warmup + seconds, the good client during the last `seconds`."""
    f = Flood(port, sockets, source)
    try:
        time.sleep(warmup)
        lat = good_client(port, seconds)
    finally:
        f.close()
    return lat, f.reopened


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--sockets", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--source", default="127.0.0.1")
    a = ap.parse_args()
    lat, reopened = measure(a.port, a.sockets, a.seconds, a.warmup, a.source)
    times = sorted(t for t, _ in lat)
    bad = [s for _, s in lat if s != 200]
    print(f"{a.sockets} idle sockets from {a.source}, reopened {reopened} times: "
          f"{len(lat)} GET /api/v1/status, worst {times[-1] * 1000:.0f} ms, "
          f"median {times[len(times) // 2] * 1000:.0f} ms, not 200: {len(bad)} {bad[:3]}")


if __name__ == "__main__":
    main()

"""A TCP port of this host forwarded into a testbed namespace: the browser on
the machine reaches weir's API and dashboard, which listen on 127.0.0.1 inside
the gateway's namespace (`scripts/testbed dashboard`).

The listening socket is made here; the process then joins the namespace
(setns), so every socket it connects from then on is the namespace's."""

import ctypes
import os
import socket
import threading

from .netns import ns_name

CLONE_NEWNET = 0x40000000


def _pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(ns, listen, port, target_port, ready=None):
    """Forward listen:port of this namespace to 127.0.0.1:target_port of
    testbed namespace ns ('gw') until interrupted."""
    srv = socket.create_server((listen, port), reuse_port=False)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{ns_name(ns)}", os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns into {ns_name(ns)}")
    os.close(fd)
    if ready:
        ready()
    while True:
        c, _ = srv.accept()
        try:
            up = socket.create_connection(("127.0.0.1", target_port), timeout=5)
        except OSError:
            c.close()
            continue
        up.settimeout(None)
        for a, b in ((c, up), (up, c)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

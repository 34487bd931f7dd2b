"""TCP-MD5 connections across weir (issue 36 item 6), with real Linux TCP.

A BGP session is a TCP connection signed with TCP-MD5 (RFC 2385, option 19): the
signature covers the segment's window and ACK, so a host drops any segment weir
rewrote (postack's window clamp, tcr's window sizing) and any ACK or RST weir made
(pep's p-ACKs). l1 and w1 set a TCP-MD5 key for each other (TCP_MD5SIG) and move
4 MB each way through a 20 Mbit/s class of each mode: the transfer must finish
intact and in time, weir must count its segments as `tcp_signed`, and no window of
it may be cut. Before the fix the clamped or p-acked connection stalled (every ACK
the sender got failed its signature) and the client timed out.
"""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "test" / "py"))

from conftest import weir_testbed  # noqa: E402
from test_classes import write_config  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.traffic import PYTHON  # noqa: E402

PORT = 1790
NBYTES = 4 << 20
# Both ends of one signed connection: the server (w1) reads NBYTES, sends NBYTES
# back, then the SHA-256 of what it read; the client (l1) checks both. A key is set
# for the peer's address on each socket (struct tcp_md5sig: address, flags,
# prefix length, key length, ifindex, 80 bytes of key).
MD5_PEER = r'''
import hashlib, socket, struct, sys
role, peer, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def md5(s, key=b"weir-bgp-key"):
    a = struct.pack("=H", socket.AF_INET) + struct.pack("!H", 0) + socket.inet_aton(peer)
    s.setsockopt(socket.IPPROTO_TCP, 14, a.ljust(128, b"\0") +
                 struct.pack("=BBHi", 0, 0, len(key), 0) + key.ljust(80, b"\0"))
def read(s, n):
    h, got = hashlib.sha256(), 0
    while got < n:
        b = s.recv(min(65536, n - got))
        if not b:
            break
        got += len(b)
        h.update(b)
    return got, h.hexdigest()
data = bytes(range(256)) * (n // 256)
if role == "server":
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    md5(l)
    l.bind(("", port))
    l.listen(1)
    print("ready", flush=True)
    l.settimeout(60)
    c, _ = l.accept()
    c.settimeout(30)
    got, digest = read(c, n)
    c.sendall(data)
    c.sendall(digest.encode())
    c.close()
    print(got, flush=True)
else:
    s = socket.socket()
    md5(s)
    s.settimeout(30)
    s.connect((peer, port))
    s.sendall(data)
    got, digest = read(s, n)
    theirs = b""
    while len(theirs) < 64:
        b = s.recv(64 - len(theirs))
        if not b:
            break
        theirs += b
    theirs = theirs.decode()
    ok = got == n and digest == hashlib.sha256(data).hexdigest() == theirs
    print("ok" if ok else f"bad: got {got}, digest match {digest == hashlib.sha256(data).hexdigest()}, "
          f"theirs {theirs == hashlib.sha256(data).hexdigest()}", flush=True)
'''

MODES = {
    "postack-clamp": 'mode = "postack"; postack = { clamp = true; };',
    "tcr": 'mode = "tcr";',
    "pep": 'mode = "pep";',
}


@pytest.fixture(scope="module", params=list(MODES))
def signed_tb(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("signed")
    cfg = write_config(d / "signed.cfg",
                       body='shaping = { outbound = "20mbit"; inbound = "20mbit"; %s };\n'
                       % MODES[request.param])
    with weir_testbed(cfg, lan=1, wan=1, paths=[PathSpec(delay=10)]) as tb:
        tb.mode = request.param
        yield tb


def ports_sum(st, key):
    return sum(p.get(key, 0) for p in st["ports"].values())


def test_md5_session_survives(signed_tb):
    tb = signed_tb
    before = tb.weir_stats()
    srv = tb.popen("w1", [PYTHON, "-c", MD5_PEER, "server", tb.addr("l1"), str(PORT), str(NBYTES)])
    try:
        assert srv.stdout.readline().strip() == "ready", srv.stderr.read()
        cli = tb.run("l1", [PYTHON, "-c", MD5_PEER, "client", tb.addr("w1"), str(PORT), str(NBYTES)],
                     timeout=90, check=False)
        out = srv.communicate(timeout=60)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    st = tb.weir_stats()
    signed = ports_sum(st, "tcp_signed") - ports_sum(before, "tcp_signed")
    clamped = ports_sum(st, "win_clamped") - ports_sum(before, "win_clamped")
    print(f"{tb.mode}: client {cli.stdout.strip()!r} {cli.stderr.strip()[-300:]!r}; "
          f"server {out[0].strip()!r}; tcp_signed {signed}, win_clamped {clamped}; "
          f"pep {st.get('pep')}")
    assert cli.returncode == 0 and cli.stdout.strip() == "ok", (cli.stdout, cli.stderr[-500:])
    assert out[0].strip() == str(NBYTES), out
    # Every segment of the connection both ways, counted once: 2 x 4 MB is ~5,800
    # full segments of data and their ACKs.
    assert signed > 5000, signed
    assert clamped == 0, clamped
    if tb.mode == "pep":
        assert st["pep"]["flows"] == 0 and st["pep"]["packed"] == 0, st["pep"]

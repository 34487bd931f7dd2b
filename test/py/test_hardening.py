"""Issue 16/17 hardening against the real binary: scripts that used to freeze the management
lcore, connection floods against the API, hostile paths and bodies, lenient values, include
and token-file mistakes, the policy upload on a full disk and cross-site requests."""
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from test_rest import REPO, WEIR, Weir, assert_error, put_script, script_weir

pytestmark = [pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}"),
              pytest.mark.skipif(os.geteuid() != 0, reason="weir on net_pcap ports is run as root")]

CHECK_CFG = """\
eal = ["--no-huge", "-m", "128", "--no-pci", "--file-prefix=whard-{tag}"];
log_level = "error";
lcores = {{ management = 0; workers = [1]; }};
ports = {{
  lan = {{ device = "net_null0"; }};
  wan = {{ device = "net_null1"; }};
}};
mempool = {{ mbufs = 8191; cache = 128; }};
"""

LINK = ('weir.link{ dir = "outbound", rate = "30mbit", default = "bulk" }\n'
        'weir.class{ dir = "outbound", name = "bulk", rate = "10mbit" }\n'
        'weir.link{ dir = "inbound", rate = "30mbit" }\n')
BACKTRACK = 'local s = string.rep("a", 30000); string.find(s, string.rep("a-", 12) .. "b")\n'


def check(tmp_path, text, timeout=30):
    cfg = tmp_path / "weir.cfg"
    cfg.write_text(text)
    t0 = time.monotonic()
    p = subprocess.run([str(WEIR), "--", "--config", str(cfg), "--check"], capture_output=True,
                       text=True, timeout=timeout)
    return cfg, p, time.monotonic() - t0


# ---- 16.1: C functions a script calls are bounded ----

@pytest.mark.parametrize("body,line,needle", [
    (BACKTRACK, 4, "string.find: pattern too costly"),
    ('local s = ("x"):rep(3000)\nwhile true do s:find("x-y") end\n', 5, "time limit exceeded"),
    ('local s = string.rep("", 1e15)\n', 4, "string.rep: not enough memory"),
])
def test_check_bounds_c_functions(tmp_path, body, line, needle):
    script = tmp_path / "p.lua"
    script.write_text(LINK + body)
    _, p, took = check(tmp_path, CHECK_CFG.format(tag="lua") +
                       f'policy = {{ script = "{script}"; instructions = 10000000000; }};\n')
    print(f"\n--check refused it in {took * 1000:.0f} ms: {p.stderr.strip()}")
    assert p.returncode != 0 and took < 10, (took, p.stderr)
    assert p.stderr.startswith(f"{script}:{line}: ") and needle in p.stderr, p.stderr


def test_upload_of_a_runaway_script(tmp_path):
    w, script = script_weir(tmp_path, "runaway")
    try:
        before = script.read_text()
        t0 = time.monotonic()
        e = assert_error(*put_script(w, LINK + BACKTRACK), 422)
        assert time.monotonic() - t0 < 5
        assert e["message"].startswith(f"{script}:4: ") and "pattern too costly" in e["message"]
        assert script.read_text() == before
        assert w.get("/api/v1/status")[0] == 200
    finally:
        w.stop()


def test_sigterm_stops_a_busy_hook(tmp_path):
    """A timer that keeps the management lcore busy in allowed calls: SIGTERM still ends
    weir within a second."""
    w, script = script_weir(tmp_path, "busy")
    try:
        busy = LINK + ('weir.every(1, function()\n'
                       '  local s = ("x"):rep(3000)\n'
                       '  while true do s:find("x-y") end\n'
                       'end)\n')
        assert put_script(w, busy)[0] == 200
        time.sleep(1.5)                 # the timer is running now (2 s limit)
        t0 = time.monotonic()
        w.p.send_signal(signal.SIGTERM)
        out, err = w.p.communicate(timeout=30)
        took = time.monotonic() - t0
        print(f"\nSIGTERM during a busy timer: weir exited in {took * 1000:.0f} ms")
        assert w.p.returncode == 0, err
        assert took < 1.0, took
    finally:
        if w.p.poll() is None:
            w.stop()


# ---- 16.2: connection floods ----

class Attack:
    """n sockets from each of the source addresses, kept open: reopened as soon as weir
    closes one. slow: send a header byte every `every` s (slowloris); else idle."""

    def __init__(self, port, n, sources=("127.0.0.2",), slow=False, every=0.5):
        import threading
        self.port, self.slow, self.every = port, slow, every
        self.want = [(src, i) for src in sources for i in range(n)]
        self.socks = {}
        self.reopened = 0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def open(self, key):
        s = socket.socket()
        s.setblocking(False)
        s.bind((key[0], 0))
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        self.socks[key] = (s, 0)

    def run(self):
        for key in self.want:
            self.open(key)
        while not self.stop.wait(self.every):
            for key, (s, sent) in list(self.socks.items()):
                try:
                    if s.recv(4096, socket.MSG_DONTWAIT) == b"":
                        raise ConnectionError
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    self.reopened += 1
                    self.open(key)
                    continue
                if self.slow:
                    line = b"GET /api/v1/status HTTP/1.1\r\nX-a: "
                    try:
                        s.send(line[sent:sent + 1] if sent < len(line) else b"a")
                        self.socks[key] = (s, sent + 1)
                    except OSError:
                        pass

    def close(self):
        self.stop.set()
        self.t.join()
        for s, _ in self.socks.values():
            s.close()


def latencies(w, seconds=4.0):
    """GET /status from a well-behaved client (127.0.0.1) for `seconds`: each latency."""
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            status, _, _ = w.request("GET", "/api/v1/status", timeout=5)
        except OSError as e:
            status = repr(e)
        out.append((time.monotonic() - t0, status))
        time.sleep(0.2)
    return out


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    w = Weir(tmp_path_factory.mktemp("flood"), "flood")
    yield w
    w.stop()


@pytest.mark.parametrize("name,kw", [
    ("64 idle", dict(n=64)),
    ("500 idle", dict(n=500)),
    ("100 slowloris", dict(n=100, slow=True, every=2.0)),
    ("100 fast slowloris", dict(n=100, slow=True, every=0.2)),
    ("100 slowloris from 127.0.0.1", dict(n=100, slow=True, every=2.0, sources=["127.0.0.1"])),
    ("20 addresses x 16 slowloris", dict(n=16, slow=True, every=1.0,
                                         sources=[f"127.0.0.{i}" for i in range(2, 22)])),
])
def test_api_answers_during_a_flood(api, name, kw):
    a = Attack(api.port, **kw)
    try:
        time.sleep(3)       # the attack is established, past the header deadline
        lat = latencies(api)
    finally:
        a.close()
    worst = max(t for t, _ in lat)
    print(f"\n{name}: {len(lat)} GET /status, worst {worst * 1000:.0f} ms, "
          f"median {sorted(t for t, _ in lat)[len(lat) // 2] * 1000:.0f} ms, "
          f"attack sockets reopened {a.reopened}")
    assert all(status == 200 for _, status in lat), lat
    assert worst < 1.0, lat


# ---- 16.4: error bodies ----

def test_error_messages_with_bytes_that_are_not_utf8(api):
    e = assert_error(*api.request("PATCH", "/api/v1/classes/outbound/%ff%fe",
                                  body={"rate": "1mbit"}), 404)
    assert "\\xff\\xfe" in e["message"], e


def test_nul_in_the_url_is_refused(api):
    before = api.get("/api/v1/classes")[1]
    e = assert_error(*api.request("PATCH", "/api/v1/classes/outbound/gold%00x",
                                  body={"rate": "1mbit"}), 400)
    assert "NUL" in e["message"]
    assert api.get("/api/v1/classes")[1]["outbound"] == before["outbound"]
    assert_error(*api.request("GET", "/api/v1/status%00"), 400)
    assert_error(*api.request("GET", "/api/v1/flows?proto=tcp%00x"), 400)
    assert api.get("/api/v1/status")[0] == 200


def test_lua_error_with_bytes_that_are_not_utf8(tmp_path):
    w, script = script_weir(tmp_path, "utf8")
    try:
        e = assert_error(*w.request("PUT", "/api/v1/policy", body=LINK.encode() +
                                    b'error("caf\xe9 \xff")\n',
                                    headers={"Content-Type": "text/x-lua"}), 422)
        assert e["message"].startswith(f"{script}:4: ") and "caf\\xe9 \\xff" in e["message"], e
    finally:
        w.stop()


# ---- 16.5: rate strings follow the documented grammar exactly ----

LENIENT = ["0x10mbit", "1e1mbit", " 5mbit", "5mbit ", "inf", "nan", "+5mbit", "-0", "5.mbit",
           ".5mbit", "5 mbit", "5mbits", "0x10", "1e7", "5mbit\n"]


@pytest.mark.parametrize("rate", LENIENT)
def test_config_refuses_lenient_rates(tmp_path, rate):
    text = CHECK_CFG.format(tag="rate") + f'shaping = {{ outbound = "{rate}"; }};\n'
    text = text.replace('"5mbit\n"', '"5mbit\\n"')
    cfg, p, _ = check(tmp_path, text)
    line = len(text.splitlines())
    assert p.returncode != 0 and p.stderr.startswith(f"{cfg}:{line}: "), p.stderr
    assert "must be a rate" in p.stderr, p.stderr


@pytest.mark.parametrize("rate", LENIENT)
def test_api_refuses_lenient_rates(api, rate):
    before = api.get("/api/v1/classes")[1]["outbound"]
    e = assert_error(*api.request("PATCH", "/api/v1/classes/outbound/gold",
                                  body={"rate": rate}), 400)
    assert "must be a rate" in e["message"]
    assert api.get("/api/v1/classes")[1]["outbound"] == before


def test_documented_rates_still_accepted(tmp_path):
    for rate in ("20mbit", "1.5gbit", "800kbit", "64000bit", "64000", "20Mbit", "0"):
        text = CHECK_CFG.format(tag="rate") + f'shaping = {{ outbound = "{rate}"; }};\n'
        _, p, _ = check(tmp_path, text)
        assert p.returncode == 0, (rate, p.stderr)


# ---- 16.6: includes and the token file ----

def include_case(tmp_path, setup, include):
    setup(tmp_path)
    text = CHECK_CFG.format(tag="inc") + f"@include \"{include}\"\n"
    cfg, p, took = check(tmp_path, text, timeout=10)
    return cfg, len(text.splitlines()), p


def test_include_of_nothing(tmp_path):
    cfg, line, p = include_case(tmp_path, lambda d: None, "")
    assert p.returncode == 1 and p.stderr.startswith(f"{cfg}:{line}: "), p.stderr
    assert "names no file" in p.stderr and "flex" not in p.stderr


def test_include_of_a_directory_and_a_fifo(tmp_path):
    cfg, line, p = include_case(tmp_path, lambda d: (d / "sub").mkdir(), "sub")
    assert p.returncode == 1 and p.stderr.startswith(f"{cfg}:{line}: "), p.stderr
    assert "not a regular file" in p.stderr
    cfg, line, p = include_case(tmp_path, lambda d: os.mkfifo(d / "fifo"), "fifo")
    assert p.returncode == 1 and "not a regular file" in p.stderr, p.stderr


def test_include_of_a_missing_file(tmp_path):
    cfg, line, p = include_case(tmp_path, lambda d: None, "nope.cfg")
    assert p.returncode == 1 and p.stderr.startswith(f"{cfg}:{line}: "), p.stderr
    assert "cannot read" in p.stderr and "nope.cfg" in p.stderr


def test_include_of_a_file_that_is_not_config(tmp_path):
    def setup(d):
        (d / "blob.cfg").write_bytes(b"\x7fELF\x02\x01\x01\x00 binary ][")
        (d / "mid.cfg").write_text("# nested\n\n@include \"blob.cfg\"\n")
    cfg, line, p = include_case(tmp_path, setup, "mid.cfg")
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith(f"{tmp_path}/blob.cfg:1: syntax error"), p.stderr
    assert f"(included from {tmp_path}/mid.cfg:3)" in p.stderr, p.stderr


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_token_file_readable_by_others_is_refused(tmp_path, mode):
    tok = tmp_path / "token"
    tok.write_text("0123456789abcdef0123\n")
    tok.chmod(mode)
    text = CHECK_CFG.format(tag="tok") + 'management = {\n  token_file = "token";\n};\n'
    cfg, p, _ = check(tmp_path, text)
    assert p.returncode == 1 and p.stderr.startswith(f"{cfg}:{len(text.splitlines()) - 1}: ")
    assert "only its owner" in p.stderr and f"{mode:04o}" in p.stderr, p.stderr
    tok.chmod(0o600)
    assert check(tmp_path, text)[1].returncode == 0


# ---- 17.16: the policy upload's files ----

def test_upload_never_writes_through_a_planted_name(tmp_path):
    w, script = script_weir(tmp_path, "plant")
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    try:
        for name in (".upload", ".prev.tmp", ".keep"):
            Path(f"{script}{name}").symlink_to(victim)
        new = script.read_text().replace('"bulk"', '"guests"')
        status, _, data = put_script(w, new)
        assert status == 200, data
        assert victim.read_text() == "precious\n"
        assert not script.is_symlink() and script.read_text() == new
        assert not Path(f"{script}.prev").is_symlink()
        assert not [p for p in tmp_path.iterdir() if ".upload." in p.name]
    finally:
        w.stop()


def fill(path, size=None):
    """Write path until the disk is full, or size bytes."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    left = size
    try:
        while left is None or left > 0:
            n = os.write(fd, b"\1" * (4096 if left is None else min(4096, left)))
            left = None if left is None else left - n
    except OSError:
        pass
    finally:
        os.close(fd)


def test_upload_on_a_full_disk(tmp_path):
    """The script on a 256 KiB tmpfs filled up: the upload is refused with 507, the old file
    and the running policy stay, nothing is left behind; a switch that fails on the full disk
    still puts the old script back (a rename, no space needed)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], check=True)
    try:
        script = mnt / "policy.lua"
        original = (REPO / "lua" / "policy.lua").read_text()
        script.write_text(original)

        def lua(text):
            return (text[:text.index("shaping = {")] + text[text.index("management = {"):] +
                    f'policy = {{ script = "{script}"; }};\n')

        w = Weir(tmp_path, "full", edit=lua)
        try:
            epoch = w.get("/api/v1/policy")[1]["epoch"]
            new = original.replace('"bulk"', '"guests"')
            fill(mnt / "fill")
            e = assert_error(*put_script(w, new), 507)
            assert "No space left" in e["message"], e
            assert script.read_text() == original
            assert sorted(p.name for p in mnt.iterdir()) == ["fill", "policy.lua"]
            assert w.get("/api/v1/policy")[1]["epoch"] == epoch

            # Room for the upload only: the switch then fails (no inbound tree) and the old
            # script comes back although no byte is free for a copy of it.
            os.unlink(mnt / "fill")
            outbound_only = new[:new.index("-- WAN -> LAN")] + \
                new[new.index("-- First match"):].replace('weir.rule{ class = "guests", vlan',
                                                          '-- ')
            free = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
            fill(mnt / "fill", free - 4096 * ((len(outbound_only) + 4095) // 4096))
            e = assert_error(*put_script(w, outbound_only), 422)
            assert "restart" in e["message"], e
            assert script.read_text() == original
            assert sorted(p.name for p in mnt.iterdir()) == ["fill", "policy.lua"]
            os.unlink(mnt / "fill")
            status, _, data = put_script(w, new)
            assert status == 200, data
            assert sorted(p.name for p in mnt.iterdir()) == ["policy.lua", "policy.lua.prev"]
        finally:
            w.stop()
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


# ---- 17.17: the token is reloaded with the policy ----

def test_token_rotation_and_a_broken_token_file(tmp_path):
    tok = tmp_path / "token"
    a, b = "token-A-0123456789abcdef", "token-B-0123456789abcdef"
    tok.write_text(a + "\n")
    tok.chmod(0o600)
    w = Weir(tmp_path, "rotate", extra=' token_file = "token";')
    try:
        w.token = a
        assert w.get("/api/v1/status")[0] == 200
        # Rotated on disk, then a reload: the new token works, the old one no longer.
        tok.write_text(b + "\n")
        status, _, data = w.request("POST", "/api/v1/policy/reload", body={})
        assert status == 200 and "token_error" not in json.loads(data), data
        assert_error(*w.request("GET", "/api/v1/status"), 401)
        w.token = b
        assert w.get("/api/v1/status")[0] == 200
        # With a token (which no web page knows) the cross-site checks do not apply.
        assert raw(w, "POST", "/api/v1/counters/reset",
                   {"Host": "weir.example", "Authorization": f"Bearer {b}"})[0] == 200
        # A short, an open or a missing token file: the policy still reloads, the token in
        # force stays, and the reply says why.
        line = next(i for i, l in enumerate(w.text.splitlines(), 1) if "token_file" in l)
        for breakit, needle in ((lambda: tok.write_text("short\n"), "must be 16 to"),
                                (lambda: tok.chmod(0o644), "only its owner"),
                                (lambda: tok.unlink(), "cannot read")):
            tok.write_text(b + "\n")
            tok.chmod(0o600)
            breakit()
            epoch = w.get("/api/v1/policy")[1]["epoch"]
            status, _, data = w.request("POST", "/api/v1/policy/reload", body={})
            r = json.loads(data)
            assert status == 200 and r["epoch"] == epoch + 1, data
            assert r["token_error"].startswith(f"{w.cfg}:{line}: ") and needle in r["token_error"]
            assert "token in force stays" in r["token_error"]
            assert w.get("/api/v1/policy")[1]["token_error"] == r["token_error"]
            assert w.get("/api/v1/status")[0] == 200
            assert_error(*w.request("GET", "/api/v1/status", token=False), 401)
        # SIGHUP does the same.
        tok.write_text(a + "\n")
        tok.chmod(0o600)
        epoch = w.get("/api/v1/policy")[1]["epoch"]
        w.p.send_signal(signal.SIGHUP)
        w.token = a
        deadline = time.time() + 10
        while time.time() < deadline and w.request("GET", "/api/v1/status")[0] != 200:
            time.sleep(0.1)
        assert w.get("/api/v1/policy")[1]["epoch"] == epoch + 1
        assert w.get("/api/v1/policy")[1]["token_error"] == ""
    finally:
        w.stop()


# ---- 17.18: no token: no cross-site or DNS-rebinding changes ----

def raw(w, method, path, headers, body=b""):
    """A request with exactly these headers (http.client adds Host only if absent)."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", w.port, timeout=10)
    try:
        c.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for k, v in headers.items():
            c.putheader(k, v)
        c.putheader("Content-Length", str(len(body)))
        c.endheaders(body)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def test_cross_site_posts_are_refused(api):
    here = f"127.0.0.1:{api.port}"
    epoch = api.get("/api/v1/policy")[1]["epoch"]
    # A form or fetch() without preflight can only send these types, or none.
    # A POST with neither a type nor a body is no form: accepted (issue 42.6), see
    # test_openapi_fuzz.py::test_bodyless_posts_without_content_type.
    for ctype in ("text/plain", "application/x-www-form-urlencoded",
                  "multipart/form-data; boundary=x"):
        h = {"Content-Type": ctype} if ctype else {}
        for path in ("/api/v1/counters/reset", "/api/v1/policy/reload"):
            e = assert_error(*raw(api, "POST", path, h), 415)
            assert "application/json" in e["message"]
    for path in ("/api/v1/counters/reset", "/api/v1/policy/reload"):
        e = assert_error(*raw(api, "POST", path, {}, b"{}"), 415)
    # DNS rebinding: the browser names the attacker's domain in Host.
    for host in ("evil.example", f"evil.example:{api.port}", "127.0.0.1.evil.example",
                 "localhost.", "[::1", "127.0.0.1:x"):
        e = assert_error(*raw(api, "POST", "/api/v1/policy/reload",
                              {"Host": host, "Content-Type": "application/json"}, b"{}"), 403)
        assert "DNS rebinding" in e["message"], e
        assert_error(*raw(api, "PATCH", "/api/v1/classes/outbound/gold",
                          {"Host": host, "Content-Type": "application/json"},
                          b'{"rate": "1mbit"}'), 403)
    # Cross-site: Origin is another site.
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{api.port + 1}",
                   f"ftp://{here}"):
        e = assert_error(*raw(api, "POST", "/api/v1/policy/reload",
                              {"Host": here, "Origin": origin,
                               "Content-Type": "application/json"}, b"{}"), 403)
        assert "another origin" in e["message"], e
    assert api.get("/api/v1/policy")[1]["epoch"] == epoch
    # Reads stay open to any Host (scrapers may use a name); weirctl's way works.
    assert raw(api, "GET", "/api/v1/status", {"Host": "weir.example"})[0] == 200
    for host, origin in ((here, None), (f"localhost:{api.port}", None),
                         (f"[::1]:{api.port}", None), (here, f"http://{here}"), ("10.1.2.3", None)):
        h = {"Host": host, "Content-Type": "application/json"}
        if origin:
            h["Origin"] = origin
        assert raw(api, "POST", "/api/v1/counters/reset", h)[0] == 200, (host, origin)


# ---- 42.7: a local runaway cannot lock the operator out ----

def test_api_answers_during_a_local_flood(api):
    """500 idle sockets from 127.0.0.1 (not limited per client), each reopened as soon as weir
    closes it: a good client's request still gets its answer within a second."""
    from rest_flood import measure
    lat, reopened = measure(api.port, sockets=500, seconds=4.0, warmup=3.0)
    times = sorted(t for t, _ in lat)
    print(f"\n500 idle from 127.0.0.1, reopened at once: {len(lat)} GET /status, "
          f"worst {times[-1] * 1000:.0f} ms, median {times[len(times) // 2] * 1000:.0f} ms, "
          f"attack sockets reopened {reopened}")
    assert all(status == 200 for _, status in lat), lat
    assert times[-1] < 1.0, lat

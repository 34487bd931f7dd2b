"""scripts/weirctl against a real weir on net_pcap ports (test_rest.py's appliance): each
command's table and --json, policy upload and rollback, errors and exit statuses."""
import json
import subprocess
import sys
import time

import pytest

from test_rest import FLOWS, REPO, Weir, make_cert, script_weir, weir  # noqa: F401 (weir: a fixture)

WEIRCTL = REPO / "scripts" / "weirctl"


def ctl(w, *args, token_file=None):
    cmd = [sys.executable, str(WEIRCTL), "--url", f"http://127.0.0.1:{w.port}"]
    if token_file:
        cmd += ["--token-file", str(token_file)]
    p = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def ok(w, *args, **kw):
    rc, out, err = ctl(w, *args, **kw)
    assert rc == 0, (args, out, err)
    return out


def test_status(weir):
    out = ok(weir, "status")
    assert out.startswith("weir ") and "policy" in out
    lines = out.splitlines()
    lan = next(l for l in lines if l.startswith("lan "))
    assert "net_pcap0" in lan and lan.split()[-5] == str(len(FLOWS))
    assert json.loads(ok(weir, "--json", "status"))["flows"]["active"] == len(FLOWS)


def test_classes(weir):
    out = ok(weir, "classes").splitlines()
    head = out[0].split()
    assert head[:4] == ["DIR", "CLASS", "RATE", "CEIL"] and "QUEUE" in head and "DROPS" in head
    rows = {l.split()[1]: l.split() for l in out[1:]}
    assert rows["gold"][:4] == ["outbound", "gold", "20Mbit", "30Mbit"]
    assert rows["bulk"][2] == "10Mbit" and rows["default"][0] == "inbound"
    # Columns line up: every row's cells start where the header's do.
    for l in out[1:]:
        assert l[len(out[0].split("CLASS")[0]) - 1] == " "
    assert json.loads(ok(weir, "--json", "classes"))["outbound"]["rate_bps"] == 30_000_000


def test_flows(weir):
    out = ok(weir, "flows").splitlines()
    assert out[0].split()[:3] == ["PROTO", "LAN", "WAN"]
    assert out[-1] == f"{len(FLOWS)} flows" and len(out) == len(FLOWS) + 2
    assert any("[2001:db8::4]:5001" in l for l in out)
    out = ok(weir, "flows", "--class", "gold").splitlines()
    assert len(out) == 3 and "10.0.0.1:40001" in out[1] and "192.0.2.1:443" in out[1]
    out = ok(weir, "flows", "--proto", "udp", "--limit", "1").splitlines()
    assert out[-1] == "2 flows (first 1 shown)"
    assert json.loads(ok(weir, "--json", "flows", "--port", "53"))["total"] == 2
    assert json.loads(ok(weir, "--json", "flows", "--host", "10.0.0.0/30"))["total"] == 3


def test_top(weir):
    t0 = time.monotonic()
    out = ok(weir, "top", "--interval", "0.3", "--count", "2")
    assert time.monotonic() - t0 >= 0.6
    # Not a tty: two plain tables, no escape codes.
    assert "\033" not in out and out.count("weir top:") == 2
    assert "MEASURED" in out and "RATE_OUT" in out and "10.0.0.1:40001" in out
    lines = [json.loads(l) for l in ok(weir, "--json", "top", "--interval", "0.2", "--count",
                                        "1").splitlines()]
    assert len(lines) == 1 and 0.15 < lines[0]["interval_s"] < 5
    # The pcap was replayed once: nothing moves now.
    assert all(c["rate_bps"] == 0 for c in lines[0]["classes"])
    assert len(lines[0]["flows"]) == len(FLOWS)
    assert all(f["rate_out_bps"] == f["rate_in_bps"] == 0 for f in lines[0]["flows"])


def test_rates_from_two_samples():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("weirctl", str(WEIRCTL))
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("weirctl", loader))
    loader.exec_module(mod)

    def flow(port, out, inn, age=10):
        return {"proto_num": 6, "vlan": 0, "lan": {"addr": "10.0.0.1", "port": port},
                "wan": {"addr": "192.0.2.1", "port": 80}, "age_s": age,
                "out": {"bytes": out}, "in": {"bytes": inn}}
    cl = lambda b: {"outbound": {"classes": [{"name": "a", "bytes": b}]}, "inbound": None}
    s0 = (0.0, cl(1000), {"flows": [flow(1, 100, 1000), flow(2, 0, 0)]})
    s1 = (2.0, cl(3000), {"flows": [flow(1, 350, 1000), flow(3, 50, 0, age=1),
                                    flow(4, 9999, 0, age=100)]})
    classes, flows = mod.top_rates(s0, s1)
    assert classes == {("outbound", "a"): 8000.0}
    assert flows[mod.flow_key(flow(1, 0, 0))] == (1000.0, 0.0)
    assert flows[mod.flow_key(flow(3, 0, 0))] == (200.0, 0.0)    # new: from zero
    assert mod.flow_key(flow(4, 0, 0)) not in flows               # old, unseen: no rate


def test_counters(weir):
    out = ok(weir, "counters").splitlines()
    assert out[0].split() == ["COUNTER", "VALUE"]
    rows = dict(l.split() for l in out[1:] if len(l.split()) == 2)
    assert rows["flows.active"] == str(len(FLOWS)) and rows["mbufs.total"] == "8191"
    assert "shaping.outbound.classes.gold.rate_bps" in rows
    assert json.loads(ok(weir, "--json", "counters"))["since_reset_s"] is None


def test_counters_reset(tmp_path):
    w = Weir(tmp_path, "ctlreset")
    try:
        assert ok(w, "counters", "--reset").startswith("counters reset")
        c = json.loads(ok(w, "--json", "counters"))
        assert c["since_reset_s"] is not None and c["flows"]["inserted"] == 0
        assert json.loads(ok(w, "--json", "counters", "--reset"))["resets"] == 2
    finally:
        w.stop()


def test_policy(tmp_path):
    w, script = script_weir(tmp_path, "ctlpolicy")
    original = script.read_text()
    try:
        out = ok(w, "policy", "show")
        assert out.startswith(f"policy 1 from {script}") and original.strip() in out
        assert json.loads(ok(w, "--json", "policy", "show"))["script_text"] == original

        new = tmp_path / "new.lua"
        new.write_text(original.replace('"bulk"', '"guests"'))
        assert ok(w, "policy", "apply", str(new)) == \
            f"policy 2 in force: {new} is now {script}\n"
        assert script.read_text() == new.read_text()
        assert "guests" in ok(w, "classes")

        bad = tmp_path / "bad.lua"
        bad.write_text("weir.link{ dir = \"outbound\", rate = \"lots\" }\n")
        rc, out, err = ctl(w, "policy", "apply", str(bad))
        assert rc == 1 and out == ""
        assert err.startswith(f"weirctl: 422 {script}:1: "), err

        assert ok(w, "policy", "rollback") == f"policy 3 in force: the previous {script}\n"
        assert script.read_text() == original and "bulk" in ok(w, "classes")
        assert json.loads(ok(w, "--json", "policy", "reload"))["epoch"] == 4
        assert ok(w, "policy", "reload") == "policy 5 in force\n"
    finally:
        w.stop()


def test_class_set(tmp_path):
    w = Weir(tmp_path, "ctlclass")
    try:
        out = ok(w, "class", "set", "outbound", "gold", "--rate", "15mbit")
        assert out == ("policy 2 in force: outbound class gold rate 15Mbit, ceil 30Mbit, "
                       "mode postack (class counters start over)\n"), out
        r = json.loads(ok(w, "--json", "class", "set", "outbound", "bulk", "--rate", "8000000",
                          "--ceil", "25mbit", "--mode", "pfq"))
        assert r["epoch"] == 3 and r["class"]["rate_bps"] == 8_000_000
        assert r["class"]["ceil_bps"] == 25_000_000 and r["class"]["mode"] == "pfq"
        rows = {l.split()[1]: l.split() for l in ok(w, "classes").splitlines()[1:]}
        assert rows["gold"][2] == "15Mbit" and rows["bulk"][2:4] == ["8Mbit", "25Mbit"]
        rc, out, err = ctl(w, "class", "set", "outbound", "gold", "--rate", "40mbit")
        assert rc == 1 and err.startswith("weirctl: 422 "), err
        rc, out, err = ctl(w, "class", "set", "outbound", "nosuch", "--rate", "1mbit")
        assert rc == 1 and err.startswith("weirctl: 404 "), err
        rc, out, err = ctl(w, "class", "set", "outbound", "gold")
        assert rc == 2 and "at least one of" in err
        assert json.loads(ok(w, "--json", "status"))["policy"]["epoch"] == 3
    finally:
        w.stop()


def test_errors(weir, tmp_path):
    rc, out, err = ctl(weir, "policy", "rollback")
    assert rc == 1 and err.startswith("weirctl: 409 ") and "script" in err
    rc, out, err = ctl(weir, "flows", "--class", "nosuch")
    assert rc == 1 and err == "weirctl: 404 no class 'nosuch' in the policy in force\n"
    rc, out, err = ctl(weir, "policy", "apply", str(tmp_path / "missing.lua"))
    assert rc == 2 and "cannot read" in err
    # Nothing listening there.
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        p = subprocess.run([sys.executable, str(WEIRCTL), "--url", f"http://127.0.0.1:{port}",
                            "status"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "cannot reach weir" in p.stderr and "refused" in p.stderr


def test_token(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret-token-0123456789abcdef\n")
    token.chmod(0o600)
    w = Weir(tmp_path, "ctltoken", extra=' token_file = "token";')
    try:
        rc, out, err = ctl(w, "status")
        assert rc == 1 and err.startswith("weirctl: 401 ")
        assert ok(w, "status", token_file=token).startswith("weir ")
        # weir takes the first line (up to CR or LF), spaces and all: so must
        # weirctl, whatever follows (issue 17 #19: it sent the whole file).
        for text in ("s3cret-token-0123456789abcdef\r\nold-token-0123456789\n",
                     "s3cret-token-0123456789abcdef\n\n# rotated 2026-11-25\n"):
            token.write_text(text)
            assert ok(w, "status", token_file=token).startswith("weir "), text
        token.write_text(" s3cret-token-0123456789abcdef\n")
        rc, out, err = ctl(w, "status", token_file=token)
        assert rc == 1 and err.startswith("weirctl: 401 "), (rc, err)
    finally:
        w.stop()


def test_https(tmp_path):
    cert = make_cert(tmp_path)
    w = Weir(tmp_path, "ctltls", extra=' tls_cert = "cert.pem"; tls_key = "key.pem";')
    try:
        base = [sys.executable, str(WEIRCTL), "--url", f"https://127.0.0.1:{w.port}"]
        p = subprocess.run(base + ["--cafile", str(cert), "--json", "status"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["flows"]["capacity"] == 1024
        # Without the certificate as a CA: the system's CAs do not know it.
        p = subprocess.run(base + ["status"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and "certificate" in p.stderr, p.stderr
        p = subprocess.run(base + ["--cafile", str(tmp_path / "none.pem"), "status"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and "cannot use --cafile" in p.stderr, p.stderr
    finally:
        w.stop()

"""The management REST API and /metrics, on a real weir with net_pcap ports (no namespaces,
no NIC): what each endpoint answers, every class of bad request with its status and JSON
error body, the bearer token, many and slow clients, and docs/openapi.json against what the
server does."""
import http.client
import json
import math
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from weirtb import weir_config_text  # noqa: E402

BUILD = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build"))
WEIR = BUILD / "app" / "weir" / "weir"
OPENAPI = REPO / "docs" / "openapi.json"

pytestmark = [pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}"),
              pytest.mark.skipif(os.geteuid() != 0, reason="weir on net_pcap ports is run as root")]

BODY = """\
flows = {{ capacity = 1024; }};
shaping = {{
  outbound = {{
    rate = "30mbit";
    default = "bulk";
    classes = (
      {{ name = "gold"; rate = "20mbit"; prio = 0; }},
      {{ name = "bulk"; rate = "10mbit"; prio = 1; }}
    );
  }};
  inbound = "30mbit";
}};
rules = (
  {{ class = "gold"; proto = "tcp"; wan_port = "443"; }}
);
management = {{ port = {port};{extra} }};
"""


def cfg_text(tag, pid, port, extra, lan, empty, lan_out, wan_out):
    """weir on two net_pcap ports (the LAN replays `lan` once) with the API on `port`."""
    return weir_config_text(f"net_pcap0,rx_pcap={lan},tx_pcap={lan_out}",
                            f"net_pcap1,rx_pcap={empty},tx_pcap={wan_out}",
                            prefix=f"wrest-{tag}-{pid}", body=BODY.format(port=port, extra=extra))

# The LAN side opens these; the pcap is replayed once, so the flows then sit in the
# table until they time out (30 s and more), long enough for the tests.
FLOWS = [("10.0.0.1", 40001, "192.0.2.1", 443, "tcp"),
         ("10.0.0.2", 40002, "192.0.2.1", 80, "tcp"),
         ("10.0.0.3", 40003, "192.0.2.2", 80, "tcp"),
         ("10.0.0.4", 5000, "192.0.2.9", 53, "udp"),
         ("2001:db8::4", 5001, "2001:db8:1::9", 53, "udp")]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_pcaps(d):
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    frames = []
    for lan, lport, wan, wport, proto in FLOWS:
        ip = IPv6(src=lan, dst=wan) if ":" in lan else IP(src=lan, dst=wan)
        l4 = TCP(sport=lport, dport=wport, flags="S") if proto == "tcp" else \
            UDP(sport=lport, dport=wport) / (b"x" * 20)
        frames.append(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / ip / l4)
    wrpcap(str(d / "lan.pcap"), frames)
    wrpcap(str(d / "empty.pcap"), [], linktype=1)


class Weir:
    def __init__(self, d, tag, extra="", edit=lambda text: text, env=None):
        self.dir = d
        self.port = free_port()
        self.token = None
        write_pcaps(d)
        self.cfg = d / "weir.cfg"
        self.text = edit(cfg_text(tag=tag, pid=os.getpid(), port=self.port, extra=extra,
                                    lan=d / "lan.pcap", empty=d / "empty.pcap",
                                    lan_out=d / "lan_out.pcap", wan_out=d / "wan_out.pcap"))
        self.cfg.write_text(self.text)
        self.p = subprocess.Popen(["nice", "-n", "19", str(WEIR), "--", "--config", str(self.cfg)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, **(env or {})})
        deadline = time.time() + 30
        while time.time() < deadline:
            assert self.p.poll() is None, self.p.communicate()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError("weir's REST API did not come up")

    def request(self, method, path, body=None, headers=None, token=True, timeout=10):
        h = dict(headers or {})
        if token and self.token:
            h.setdefault("Authorization", f"Bearer {self.token}")
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            h.setdefault("Content-Type", "application/json")
        if method == "POST" and body is None:
            h.setdefault("Content-Type", "application/json")  # weir without a token asks it
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, dict(r.getheaders()), data
        finally:
            c.close()

    def get(self, path, **kw):
        status, headers, data = self.request("GET", path, **kw)
        ctype = headers.get("Content-Type", "")
        return status, (json.loads(data) if ctype.startswith("application/json") else data.decode())

    def stop(self):
        self.p.terminate()
        out, err = self.p.communicate(timeout=30)
        assert self.p.returncode == 0, err
        assert re.search(r"mbufs in use after shutdown: 0 of", out), out


@pytest.fixture(scope="module")
def weir(tmp_path_factory):
    w = Weir(tmp_path_factory.mktemp("rest"), "main")
    # Until the worker has the pcap's flows in its table.
    deadline = time.time() + 20
    while time.time() < deadline and w.get("/api/v1/flows")[1]["total"] < len(FLOWS):
        time.sleep(0.1)
    yield w
    w.stop()


def assert_error(status, headers, data, code):
    assert status == code, (status, data)
    assert headers["Content-Type"] == "application/json"
    body = json.loads(data)
    assert set(body) == {"error"}
    assert body["error"]["code"] == code and isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    return body["error"]


# ---- what each endpoint answers ----

def test_status(weir):
    status, s = weir.get("/api/v1/status")
    assert status == 200
    assert re.match(r"^\d+\.\d+\.\d+", s["version"]) and s["uptime_s"] > 0
    for role in ("lan", "wan"):
        p = s["ports"][role]
        assert p["device"].startswith("net_pcap")
        assert isinstance(p["link"]["up"], bool) and p["link"]["speed_mbps"] >= 0
        assert {"rx", "tx", "rx_bytes", "tx_bytes", "dropped"} <= set(p)
    assert s["ports"]["lan"]["rx"] == len(FLOWS)
    assert [w["lcore"] for w in s["workers"]] == [1]
    assert s["flows"] == {"active": len(FLOWS), "capacity": 1024}
    assert 0 <= s["mbufs"]["in_use"] <= s["mbufs"]["total"] == 8191
    assert s["policy"]["epoch"] >= 1 and s["policy"]["source"] == "config"


def test_classes(weir):
    status, c = weir.get("/api/v1/classes")
    assert status == 200
    out = c["outbound"]
    assert out["rate_bps"] == 30_000_000 and out["default"] == "bulk"
    by = {k["name"]: k for k in out["classes"]}
    assert set(by) == {"gold", "bulk"}
    assert by["gold"]["rate_bps"] == 20_000_000 and by["gold"]["prio"] == 0
    assert by["bulk"]["rate_bps"] == 10_000_000 and by["bulk"]["prio"] == 1
    for k in by.values():
        assert k["parent"] is None and k["leaf"] is True and k["mode"] == "postack"
        assert k["ceil_bps"] == 30_000_000
    # The pcap's one TCP flow to port 443 went through gold, the other four through bulk.
    assert by["gold"]["pkts"] == 1 and by["gold"]["flows"] == 1
    assert by["bulk"]["pkts"] == 4
    assert [k["name"] for k in c["inbound"]["classes"]] == ["default"]


def test_counters_is_the_stats_snapshot(weir):
    status, c = weir.get("/api/v1/counters")
    assert status == 200
    assert {"version", "uptime_s", "ports", "shaping", "postack", "flows", "workers", "policy",
            "mbufs"} <= set(c)
    assert c["ports"]["lan"]["managed"] == len(FLOWS)
    assert set(c["shaping"]["outbound"]["classes"]) == {"gold", "bulk"}


def test_flows_list(weir):
    status, f = weir.get("/api/v1/flows")
    assert status == 200
    assert f["total"] == len(FLOWS) and f["offset"] == 0 and f["limit"] == 100
    got = {(x["lan"]["addr"], x["lan"]["port"], x["wan"]["addr"], x["wan"]["port"], x["proto"])
           for x in f["flows"]}
    assert got == set(FLOWS)
    for x in f["flows"]:
        assert x["out"]["pkts"] == 1 and x["in"]["pkts"] == 0 and x["opened_by"] == "lan"
        assert x["state"] == ("syn_sent" if x["proto"] == "tcp" else "none")
        assert x["family"] == (6 if ":" in x["lan"]["addr"] else 4)
        assert x["out"]["class"] == ("gold" if x["wan"]["port"] == 443 else "bulk")
        assert x["in"]["class"] == "default" and x["out"]["mode"] == "postack"
        assert x["age_s"] >= x["idle_s"] >= 0


@pytest.mark.parametrize("query,expect", [
    ("proto=tcp", 3), ("proto=17", 2), ("proto=UDP", 2), ("port=443", 1), ("port=53", 2),
    ("host=10.0.0.1", 1), ("host=10.0.0.0/24", 4), ("host=192.0.2.1", 2),
    ("host=2001:db8::/32", 1), ("class=gold", 1), ("class=bulk", 4), ("class=default", 5),
    ("proto=tcp&port=80&host=192.0.2.2", 1), ("host=10.9.9.9", 0)])
def test_flows_filters(weir, query, expect):
    status, f = weir.get(f"/api/v1/flows?{query}")
    assert status == 200, f
    assert f["total"] == expect == len(f["flows"])


def test_flows_paging(weir):
    seen = []
    for off in range(0, 6, 2):
        status, f = weir.get(f"/api/v1/flows?limit=2&offset={off}")
        assert status == 200 and f["total"] == len(FLOWS)
        assert f["limit"] == 2 and f["offset"] == off
        assert len(f["flows"]) == min(2, len(FLOWS) - off)
        seen += [(x["worker"], x["slot"]) for x in f["flows"]]
    assert len(set(seen)) == len(FLOWS)


def test_flows_cursor_paging(weir):
    """Cursor paging (issue 17 #15): each page walks only from its cursor; following
    'next' from 0 lists every flow once, with filters too."""
    for query, want in (("", set(FLOWS)), ("&proto=udp", {f for f in FLOWS if f[4] == "udp"})):
        seen, cursor, pages = [], 0, 0
        while cursor is not None:
            status, f = weir.get(f"/api/v1/flows?limit=2&cursor={cursor}{query}")
            assert status == 200, f
            assert f["cursor"] == cursor and f["limit"] == 2 and "total" not in f
            assert len(f["flows"]) <= 2
            seen += [(x["lan"]["addr"], x["lan"]["port"], x["wan"]["addr"], x["wan"]["port"],
                      x["proto"]) for x in f["flows"]]
            assert f["next"] is None or f["next"] > cursor
            cursor = f["next"]
            pages += 1
            assert pages <= len(FLOWS) + 1
        assert sorted(seen) == sorted(want), query
    # One page holding them all says there is no next one.
    status, f = weir.get("/api/v1/flows?cursor=0&limit=1000")
    assert len(f["flows"]) == len(FLOWS) and f["next"] is None


@pytest.mark.parametrize("query", [
    "cursor=abc", "cursor=-1", "cursor=1.5"])
def test_flows_bad_cursor(weir, query):
    assert_error(*weir.request("GET", f"/api/v1/flows?{query}"), 400)


@pytest.mark.parametrize("query", [f"cursor={(1 << 32) | 5}", f"cursor={2 << 32}", "cursor=1025"])
def test_flows_cursor_in_no_table(weir, query):
    """Well-formed, but no position: 422 (the schema cannot say which exist; issue 42.6)."""
    assert_error(*weir.request("GET", f"/api/v1/flows?{query}"), 422)


@pytest.mark.parametrize("query", [
    "limit=0", "limit=1001", "limit=abc", "limit=-1", "limit=", "offset=-1", "offset=1.5",
    "port=65536", "port=x", "proto=bogus", "proto=256", "host=10.0.0", "host=10.0.0.0/33",
    "host=::1/129", "sort=bytes"])
def test_flows_bad_query(weir, query):
    assert_error(*weir.request("GET", f"/api/v1/flows?{query}"), 400)


def test_flows_of_a_class_the_policy_lacks(weir):
    """A class is a resource: one the policy lacks is 404, as for PATCH (issue 42.6)."""
    assert_error(*weir.request("GET", "/api/v1/flows?class=nosuch"), 404)
    assert_error(*weir.request("GET", "/api/v1/flows?class="), 404)


def test_policy_get(weir):
    status, p = weir.get("/api/v1/policy")
    assert status == 200
    assert p["source"] == "config" and p["config"] == str(weir.cfg)
    assert p["script"] is None and p["script_text"] is None
    assert p["epoch"] >= 1


def test_policy_reload_good_and_broken(weir):
    epoch = weir.get("/api/v1/policy")[1]["epoch"]
    status, h, data = weir.request("POST", "/api/v1/policy/reload")
    assert status == 200, data
    r = json.loads(data)
    assert r["epoch"] == epoch + 1 and r["dry_run"] is False
    # A dry run checks without switching.
    status, h, data = weir.request("POST", "/api/v1/policy/reload", body={"dry_run": True})
    assert status == 200 and json.loads(data) == {"epoch": epoch + 1, "dry_run": True,
                                                  "reloads": r["reloads"]}
    broken = weir.text.replace('rate = "20mbit"', 'rate = "20 parsecs"')
    line = next(i for i, l in enumerate(broken.splitlines(), 1) if "parsecs" in l)
    weir.cfg.write_text(broken)
    try:
        for body in (None, {"dry_run": True}):
            e = assert_error(*weir.request("POST", "/api/v1/policy/reload", body=body), 422)
            assert e["message"].startswith(f"{weir.cfg}:{line}: "), e
            assert e["epoch"] == epoch + 1
        status, p = weir.get("/api/v1/policy")
        assert p["epoch"] == epoch + 1 and p["last_error"].startswith(f"{weir.cfg}:{line}: ")
        assert p["reload_failures"] == 1      # the dry run is not a failed reload
    finally:
        weir.cfg.write_text(weir.text)
    assert weir.request("POST", "/api/v1/policy/reload")[0] == 200
    status, p = weir.get("/api/v1/policy")
    assert p["epoch"] == epoch + 2 and p["last_error"] == ""


def test_policy_from_a_script(tmp_path):
    script = REPO / "lua" / "policy.lua"

    def lua(text):
        return (text[:text.index("shaping = {")] + text[text.index("management = {"):] +
                f'policy = {{ script = "{script}"; }};\n')

    w = Weir(tmp_path, "lua", edit=lua)
    try:
        status, p = w.get("/api/v1/policy")
        assert status == 200
        assert p["source"] == "script" and p["script"] == str(script)
        assert p["script_text"] == script.read_text()
        status, c = w.get("/api/v1/classes")
        assert status == 200 and c["epoch"] == p["epoch"]
        by = {k["name"]: k for k in c["outbound"]["classes"]}
        assert by["staff"]["parent"] is None and by["staff"]["leaf"] is False
        assert by["staff"]["mode"] is None and "flows" not in by["staff"]
        assert by["voip"]["parent"] == "staff" and by["voip"]["leaf"] is True
        assert by["voip"]["flow_min_bps"] == 100_000 and by["voip"]["ceil_bps"] == 2_000_000
        assert w.request("POST", "/api/v1/policy/reload")[0] == 200
        assert w.get("/api/v1/policy")[1]["epoch"] == p["epoch"] + 1
    finally:
        w.stop()


def test_counters_reset(tmp_path):
    w = Weir(tmp_path, "reset")
    try:
        deadline = time.time() + 20
        while time.time() < deadline and w.get("/api/v1/flows")[1]["total"] < len(FLOWS):
            time.sleep(0.1)
        status, before = w.get("/api/v1/counters")
        assert status == 200 and before["since_reset_s"] is None
        assert before["ports"]["lan"]["rx"] == len(FLOWS)
        assert_error(*w.request("POST", "/api/v1/counters/reset", body={"x": 1}), 400)
        status, h, data = w.request("POST", "/api/v1/counters/reset")
        assert status == 200, data
        assert json.loads(data)["resets"] == 1
        status, c = w.get("/api/v1/counters")
        assert 0 <= c["since_reset_s"] < c["uptime_s"]
        # Running totals start again from zero ...
        lan = c["ports"]["lan"]
        assert lan["rx"] == lan["rx_bytes"] == lan["managed"] == lan["forwarded"] == 0
        assert c["flows"]["inserted"] == 0 and c["flows"]["lookups"] == 0
        assert c["workers"][0]["loops"] < before["workers"][0]["loops"]
        gold = c["shaping"]["outbound"]["classes"]["gold"]
        assert gold["pkts"] == gold["bytes"] == 0
        assert c["policy"]["reloads"] == 0
        # ... levels do not.
        assert c["flows"]["active"] == len(FLOWS) and c["flows"]["capacity"] == 1024
        assert gold["rate_bps"] == 20_000_000 and gold["flows"] == 1
        assert c["workers"][0]["flows_active"] == len(FLOWS)
        assert c["mbufs"]["total"] == 8191
        by = {k["name"]: k for k in w.get("/api/v1/classes")[1]["outbound"]["classes"]}
        assert by["gold"]["pkts"] == 0 and by["gold"]["flows"] == 1
        assert by["gold"]["ceil_bps"] == 30_000_000
        # Prometheus counters and the status page never go back.
        samples, _ = parse_exposition(w.get("/metrics")[1])
        assert samples[("weir_port_packets_total",
                        frozenset({("port", "lan"), ("dir", "rx")}))] == len(FLOWS)
        assert w.get("/api/v1/status")[1]["ports"]["lan"]["rx"] == len(FLOWS)
        # A policy switch rebuilds the class trees: their counters restart below the
        # baseline and are shown whole, never negative.
        assert w.request("POST", "/api/v1/policy/reload")[0] == 200
        c = w.get("/api/v1/counters")[1]
        assert c["policy"]["reloads"] == 1
        assert all(v >= 0 for v in c["ports"]["lan"].values() if isinstance(v, int))
    finally:
        w.stop()


def script_weir(d, tag, policy_extra=""):
    """A weir whose policy is a copy of lua/policy.lua in d (uploads replace the copy);
    policy_extra: more settings of its policy group ("max_rules = 16384;")."""
    script = d / "policy.lua"
    script.write_text((REPO / "lua" / "policy.lua").read_text())

    def lua(text):
        return (text[:text.index("shaping = {")] + text[text.index("management = {"):] +
                f'policy = {{ script = "{script}"; {policy_extra}}};\n')

    return Weir(d, tag, edit=lua), script


def put_script(w, text, ctype="text/x-lua"):
    return w.request("PUT", "/api/v1/policy", body=text.encode(), headers={"Content-Type": ctype})


def outbound_classes(w):
    return {k["name"] for k in w.get("/api/v1/classes")[1]["outbound"]["classes"]}


def test_policy_upload_and_rollback(tmp_path):
    w, script = script_weir(tmp_path, "upload")
    original = script.read_text()
    try:
        # Nothing uploaded yet: nothing to roll back to.
        assert_error(*w.request("POST", "/api/v1/policy/rollback"), 409)
        epoch = w.get("/api/v1/policy")[1]["epoch"]
        assert "bulk" in outbound_classes(w)

        new = original.replace('"bulk"', '"guests"')
        status, h, data = put_script(w, new)
        assert status == 200, data
        r = json.loads(data)
        assert r["epoch"] == epoch + 1 and r["script"] == str(script)
        assert r["previous"] == f"{script}.prev"
        assert script.read_text() == new and Path(f"{script}.prev").read_text() == original
        assert "guests" in outbound_classes(w) and "bulk" not in outbound_classes(w)
        assert w.get("/api/v1/policy")[1]["script_text"] == new

        # A broken script: 422 naming the script's own path and line; nothing changes.
        broken = new + 'weir.class{ dir = "outbound", name = "x", rate = "lots" }\n'
        line = len(broken.splitlines())
        e = assert_error(*put_script(w, broken, "text/plain; charset=utf-8"), 422)
        assert e["message"].startswith(f"{script}:{line}: "), e
        assert e["epoch"] == epoch + 1
        e = assert_error(*put_script(w, "weir.link{ dir = \n"), 422)
        assert e["message"].startswith(f"{script}:"), e
        assert script.read_text() == new and not Path(f"{script}.upload").exists()
        assert w.get("/api/v1/policy")[1]["epoch"] == epoch + 1
        assert "guests" in outbound_classes(w)

        # A good script the running appliance cannot switch to (no inbound tree): the
        # file goes back.
        outbound_only = new[:new.index("-- WAN -> LAN")] + \
            new[new.index("-- First match"):].replace('weir.rule{ class = "guests", vlan', '-- ')
        e = assert_error(*put_script(w, outbound_only), 422)
        assert "restart" in e["message"] and script.read_text() == new

        assert_error(*put_script(w, original, "application/json"), 415)
        assert_error(*put_script(w, ""), 400)

        # Rollback restores the text before the upload; a second one toggles back.
        status, h, data = w.request("POST", "/api/v1/policy/rollback")
        assert status == 200, data
        assert json.loads(data)["epoch"] == epoch + 2
        assert script.read_text() == original and "bulk" in outbound_classes(w)
        assert Path(f"{script}.prev").read_text() == new
        assert w.request("POST", "/api/v1/policy/rollback")[0] == 200
        assert script.read_text() == new and "guests" in outbound_classes(w)
    finally:
        w.stop()


def test_policy_upload_needs_a_script_config(weir):
    epoch = weir.get("/api/v1/policy")[1]["epoch"]
    e = assert_error(*put_script(weir, "weir.link{}"), 409)
    assert "script" in e["message"]
    assert_error(*weir.request("POST", "/api/v1/policy/rollback"), 409)
    # The upload limit is the route's own, 1 MiB, not the 64 KiB of JSON bodies.
    assert_error(*put_script(weir, "-" * 100_000), 409)
    # Refused on the header alone, before the body (which is not sent: the server does not
    # read it).
    c = http.client.HTTPConnection("127.0.0.1", weir.port, timeout=10)
    try:
        c.putrequest("PUT", "/api/v1/policy")
        c.putheader("Content-Type", "text/x-lua")
        c.putheader("Content-Length", str(1024 * 1024 + 1))
        c.endheaders()
        r = c.getresponse()
        assert_error(r.status, dict(r.getheaders()), r.read(), 413)
    finally:
        c.close()
    status, h, data = weir.request("DELETE", "/api/v1/policy")
    assert_error(status, h, data, 405)
    assert h["Allow"] == "GET, HEAD, PUT"
    assert weir.get("/api/v1/policy")[1]["epoch"] == epoch


# ---- PATCH /api/v1/classes/{direction}/{name} ----

def patch_class(w, path, body, **kw):
    return w.request("PATCH", f"/api/v1/classes/{path}", body=body, **kw)


def test_class_change(tmp_path):
    w = Weir(tmp_path, "patch")
    try:
        epoch = w.get("/api/v1/policy")[1]["epoch"]
        status, h, data = patch_class(w, "outbound/gold", {"rate": "15mbit"})
        assert status == 200, data
        r = json.loads(data)
        assert r == {"epoch": epoch + 1, "direction": "outbound", "counters_restarted": True,
                     "class": {"name": "gold", "parent": None, "leaf": True, "mode": "postack",
                               "rate_bps": 15_000_000, "ceil_bps": 30_000_000, "prio": 0}}
        by = {k["name"]: k for k in w.get("/api/v1/classes")[1]["outbound"]["classes"]}
        assert by["gold"]["rate_bps"] == 15_000_000 and by["bulk"]["rate_bps"] == 10_000_000
        c = w.get("/api/v1/counters")[1]
        assert c["shaping"]["outbound"]["classes"]["gold"]["rate_bps"] == 15_000_000
        assert c["policy"]["epoch"] == epoch + 1
        # An integer of bit/s, the ceiling and the mode, together.
        status, h, data = patch_class(w, "outbound/bulk",
                                      {"rate": 8_000_000, "ceil": "25mbit", "mode": "pfq"})
        assert status == 200, data
        k = json.loads(data)["class"]
        assert (k["rate_bps"], k["ceil_bps"], k["mode"]) == (8_000_000, 25_000_000, "pfq")
        by = {k["name"]: k for k in w.get("/api/v1/classes")[1]["outbound"]["classes"]}
        assert by["bulk"]["ceil_bps"] == 25_000_000 and by["bulk"]["mode"] == "pfq"
        epoch += 2
        # Values weir refuses, or a policy that does not validate: 422, nothing changes.
        for body in ({"rate": "200gbit"}, {"mode": "bogus"}, {"rate": 0},
                     {"ceil": "10mbit"}, {"rate": "40mbit"}):
            e = assert_error(*patch_class(w, "outbound/gold", body), 422)
            assert e["epoch"] == epoch, (body, e)
        # Unknown fields, wrong types, no change at all: 400.
        for body in ({}, {"prio": 1}, {"rate": True}, {"rate": 1.5}, {"mode": 2},
                     {"rate": "20 parsecs"},
                     {"rate": "15mbit", "x": 1}, [], None):
            assert_error(*patch_class(w, "outbound/gold", body), 400)
        assert_error(*patch_class(w, "outbound/gold", '{"rate": "1mbit"}',
                                  headers={"Content-Type": "text/plain"}), 415)
        # No such direction or class: 404.
        for path in ("sideways/gold", "outbound/nosuch", "inbound/gold", "outbound/",
                     "outbound", "outbound/gold/x"):
            assert_error(*patch_class(w, path, {"rate": "1mbit"}), 404)
        status, h, data = w.request("GET", "/api/v1/classes/outbound/gold")
        assert_error(status, h, data, 405)
        assert h["Allow"] == "PATCH"
        assert w.get("/api/v1/policy")[1]["epoch"] == epoch
        by = {k["name"]: k for k in w.get("/api/v1/classes")[1]["outbound"]["classes"]}
        assert by["gold"]["rate_bps"] == 15_000_000
        # A reload goes back to the file.
        assert w.request("POST", "/api/v1/policy/reload")[0] == 200
        by = {k["name"]: k for k in w.get("/api/v1/classes")[1]["outbound"]["classes"]}
        assert by["gold"]["rate_bps"] == 20_000_000 and by["bulk"]["mode"] == "postack"
    finally:
        w.stop()


def test_marker_state_and_contract_change(tmp_path):
    """A class's marker over REST: its settings and colour counters in GET /classes (valid
    against the OpenAPI schema), and its contract moved by PATCH like a rate."""
    pytest.importorskip("jsonschema")
    doc = json.loads(OPENAPI.read_text())
    marker = 'marker = { type = "srtcm"; cir = "5mbit"; }; '
    w = Weir(tmp_path, "marker",
             edit=lambda t: t.replace('rate = "20mbit"; prio = 0;', 'rate = "20mbit"; prio = 0; ' + marker))
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            status, c = w.get("/api/v1/classes")
            by = {k["name"]: k for k in c["outbound"]["classes"]}
            if by["gold"]["pkts"] >= 1:
                break
            time.sleep(0.1)
        validate(doc, {"$ref": "#/components/schemas/Classes"}, c)
        m = by["gold"]["marker"]
        assert (m["type"], m["cir_bps"], m["token_rate_bps"]) == ("srtcm", 5_000_000, 5_000_000)
        # The pcap's one flow to port 443: one frame, in profile.
        assert m["pkts"] == {"green": 1, "yellow": 0, "red": 0} and m["bytes"]["green"] > 0
        assert "marker" not in by["bulk"]
        epoch = w.get("/api/v1/policy")[1]["epoch"]
        status, h, data = patch_class(w, "outbound/gold", {"contract": "8mbit"})
        assert status == 200, data
        r = json.loads(data)
        validate(doc, {"$ref": "#/components/schemas/ClassChangeResult"}, r)
        # The bucket depth left to its default (10 ms of the contract) follows it.
        assert r["epoch"] == epoch + 1 and r["class"]["marker"] == {
            "type": "srtcm", "cir_bps": 8_000_000, "cbs": 10_000}
        by = {k["name"]: k for k in w.get("/api/v1/classes")[1]["outbound"]["classes"]}
        assert by["gold"]["marker"]["cir_bps"] == 8_000_000
        assert by["gold"]["marker"]["token_rate_bps"] == 8_000_000
        # Above the class's ceil, or a class without a marker: 422, nothing changes.
        for path, body in (("outbound/gold", {"contract": "40mbit"}),
                           ("outbound/bulk", {"contract": "1mbit"})):
            e = assert_error(*patch_class(w, path, body), 422)
            assert e["epoch"] == epoch + 1, (path, e)
        assert "no marker" in assert_error(*patch_class(w, "outbound/bulk", {"contract": "1mbit"}),
                                           422)["message"]
        for body in ({"contract": 0}, {"contract": True}):
            assert_error(*patch_class(w, "outbound/gold", body), 422 if body["contract"] == 0
                         else 400)
    finally:
        w.stop()


def test_class_change_of_a_script_policy(tmp_path):
    w, script = script_weir(tmp_path, "patchlua")
    try:
        epoch = w.get("/api/v1/policy")[1]["epoch"]
        e = assert_error(*patch_class(w, "outbound/voip", {"rate": "1mbit"}), 409)
        assert str(script) in e["message"] and "PUT /api/v1/policy" in e["message"]
        assert w.get("/api/v1/policy")[1]["epoch"] == epoch
    finally:
        w.stop()


# ---- /metrics ----

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"')


def parse_exposition(text):
    """The text format 0.0.4, strictly: every sample's family has HELP and TYPE first,
    families are contiguous, names and labels valid, values floats. Returns
    {(name, frozenset(labels)): value} and {name: type}."""
    types, samples, done, current = {}, {}, set(), None
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert METRIC_NAME.match(name) and name not in done and name not in types, line
            current = name
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ")
            assert name == current and typ in ("counter", "gauge", "untyped"), line
            types[name] = typ
            continue
        assert not line.startswith("#") and line, line
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        assert m, line
        name, labels, value = m.group(1), m.group(3) or "", m.group(4)
        assert name == current and name in types, f"sample before its TYPE: {line}"
        pairs = LABEL.findall(labels)
        assert ",".join(f'{k}="{v}"' for k, v in pairs) == labels, line
        v = float(value)
        assert not math.isnan(v)
        if types[name] == "counter":
            assert v >= 0 and name.endswith("_total"), line
        key = (name, frozenset(pairs))
        assert key not in samples, f"duplicate sample {line}"
        samples[key] = v
        if current is not None:
            done.add(current)
    return samples, types


def test_metrics(weir):
    status, h, data = weir.request("GET", "/metrics")
    assert status == 200
    assert h["Content-Type"].startswith("text/plain; version=0.0.4")
    samples, types = parse_exposition(data.decode())

    def val(name, **labels):
        return samples[(name, frozenset(labels.items()))]

    assert val("weir_port_packets_total", port="lan", dir="rx") == len(FLOWS)
    assert val("weir_port_dropped_total", port="lan", reason="queue_full") >= 0
    # (A reload earlier in this module started the class counters afresh.)
    gold = frozenset({("direction", "outbound"), ("class", "gold")})
    assert samples[("weir_class_bytes_total", gold)] >= 0
    assert samples[("weir_class_packets_total", gold)] >= 0
    assert ("weir_class_drops_total", frozenset({("direction", "outbound"), ("class", "bulk"),
                                                 ("reason", "class_limit")})) in samples
    assert types["weir_class_queue_packets"] == "gauge"
    assert types["weir_class_rate_bps"] == "gauge"
    assert samples[("weir_class_rate_bps",
                    frozenset({("direction", "outbound"), ("class", "gold")}))] == 20e6
    assert val("weir_flows_active") == len(FLOWS)
    assert val("weir_flows", state="syn_sent") == 3 and val("weir_flows", state="none") == 2
    assert types["weir_postack_acks_held"] == "gauge"
    assert val("weir_worker_busy_seconds_total", worker="0") >= 0
    assert val("weir_build_info", version=weir.get("/api/v1/status")[1]["version"]) == 1
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return
    fams = {f.name: f for f in text_string_to_metric_families(data.decode())}
    assert "weir_port_packets" in fams and fams["weir_port_packets"].type == "counter"


def test_metrics_parser_rejects_bad_text():
    for bad in ("x 1\n", "# HELP a b\n# TYPE a gauge\na{l=\"x} 1\n",
                "# HELP a b\n# TYPE a counter\na 1\n", "# HELP a_total b\n# TYPE a_total gauge\n"
                "a_total nope\n"):
        with pytest.raises((AssertionError, ValueError)):
            parse_exposition(bad)


# ---- bad requests ----

def test_unknown_path_and_method(weir):
    for path in ("/", "/api/v1", "/api/v1/statusx", "/api/v2/status", "/api/v1/status/"):
        assert_error(*weir.request("GET", path), 404)
    status, h, data = weir.request("DELETE", "/api/v1/status")
    assert_error(status, h, data, 405)
    assert h["Allow"] == "GET, HEAD"
    status, h, data = weir.request("GET", "/api/v1/policy/reload")
    assert_error(status, h, data, 405)
    assert h["Allow"] == "POST"
    assert_error(*weir.request("PUT", "/metrics", body="x"), 405)
    status, h, data = weir.request("HEAD", "/api/v1/status")
    assert status == 200 and data == b""


@pytest.mark.parametrize("body,ctype,code", [
    ("{", "application/json", 400),
    ("{\"dry_run\": true} x", "application/json", 400),
    ("[]", "application/json", 400),
    ("\"dry_run\"", "application/json", 400),
    ("{\"dry_run\": true, \"dry_run\": false}", "application/json", 400),
    ("{\"dry_run\": \"yes\"}", "application/json", 400),
    ("{\"dry_run\": 1}", "application/json", 400),
    ("{\"force\": true}", "application/json", 400),
    ("{\"dry_run\": true}", "text/plain", 415),
    ("{\"dry_run\": true}", None, 415),
    ("{\"dry_run\": true}", "application/jsonx", 415),
])
def test_bad_bodies(weir, body, ctype, code):
    epoch = weir.get("/api/v1/policy")[1]["epoch"]
    headers = {"Content-Type": ctype} if ctype else {}
    assert_error(*weir.request("POST", "/api/v1/policy/reload", body=body, headers=headers), code)
    assert weir.get("/api/v1/policy")[1]["epoch"] == epoch


def test_json_content_type_with_charset(weir):
    status, h, data = weir.request("POST", "/api/v1/policy/reload", body='{"dry_run": true}',
                                   headers={"Content-Type": "application/json; charset=utf-8"})
    assert status == 200, data


def test_oversized_body(weir):
    big = json.dumps({"dry_run": True, "pad": "x" * 70000})
    assert_error(*weir.request("POST", "/api/v1/policy/reload", body=big,
                               headers={"Content-Type": "application/json"}), 413)
    # Without a Content-Length (chunked), cut while reading.
    c = http.client.HTTPConnection("127.0.0.1", weir.port, timeout=10)
    try:
        c.request("POST", "/api/v1/policy/reload", body=iter([b"{\"pad\": \"", b"y" * 70000, b"\"}"]),
                  headers={"Content-Type": "application/json"}, encode_chunked=True)
        r = c.getresponse()
        assert_error(r.status, dict(r.getheaders()), r.read(), 413)
    finally:
        c.close()


# ---- many clients, slow clients ----

def test_concurrent_and_slow_clients(weir):
    slow = socket.create_connection(("127.0.0.1", weir.port))
    slow.sendall(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\nX-Slow: ")   # and stalls
    half_body = socket.create_connection(("127.0.0.1", weir.port))
    half_body.sendall(b"POST /api/v1/policy/reload HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"dry")
    errors, stop = [], threading.Event()

    def client():
        while not stop.is_set():
            try:
                status, _ = weir.get("/api/v1/status")
                if status != 200:
                    errors.append(status)
            except Exception as e:      # noqa: BLE001 - reported below
                errors.append(repr(e))

    threads = [threading.Thread(target=client) for _ in range(20)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        for path in ("/api/v1/status", "/metrics", "/api/v1/flows"):
            t0 = time.monotonic()
            status, _, _ = weir.request("GET", path, timeout=5)
            assert status == 200 and time.monotonic() - t0 < 1.0, (path, time.monotonic() - t0)
    finally:
        stop.set()
        for t in threads:
            t.join()
        slow.close()
        half_body.close()
    assert not errors, errors[:5]


# ---- the OpenAPI document ----

IMPLEMENTED = {("/api/v1/status", "get"), ("/api/v1/classes", "get"), ("/api/v1/counters", "get"),
               ("/api/v1/counters/reset", "post"), ("/api/v1/flows", "get"), ("/api/v1/ipsec", "get"),
               ("/api/v1/hosts", "get"), ("/api/v1/measure", "get"),
               ("/api/v1/classes/{direction}/{name}", "patch"),
               ("/api/v1/policy", "get"), ("/api/v1/policy", "put"),
               ("/api/v1/policy/reload", "post"), ("/api/v1/policy/rollback", "post"),
               ("/api/v1/openapi.json", "get"), ("/metrics", "get"),
               ("/api/v1/captures", "get"), ("/api/v1/captures", "post")}


def test_openapi_served_is_the_repository_file(weir):
    status, h, data = weir.request("GET", "/api/v1/openapi.json")
    assert status == 200 and h["Content-Type"] == "application/json"
    assert data == OPENAPI.read_bytes()


def test_openapi_matches_the_server(weir):
    doc = json.loads(OPENAPI.read_text())
    assert doc["openapi"].startswith("3.")
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert IMPLEMENTED <= documented, IMPLEMENTED - documented
    for path, method in documented:
        body = {"dry_run": True} if method == "post" else None
        status, h, data = weir.request(method.upper(), path, body=body)
        # A lookup by id answers 404 for the literal "{id}": routed all the same.
        assert status != 404 or (path, method) == ("/api/v1/subscribers/{id}", "get"), (path, method)
        assert str(status) in doc["paths"][path][method]["responses"], (path, method, status)


def test_openapi_document_is_valid():
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(json.loads(OPENAPI.read_text()))


def validate(doc, schema, instance):
    """Against a schema of the document (a {"$ref": ...} or inline), its components beside
    it so references resolve."""
    import jsonschema
    jsonschema.Draft202012Validator({**schema, "components": doc["components"]}).validate(instance)


def test_openapi_schemas_validate_responses(weir):
    pytest.importorskip("jsonschema")
    doc = json.loads(OPENAPI.read_text())

    def schema_of(path, method, code):
        resp = doc["paths"][path][method]["responses"][str(code)]
        if "$ref" in resp:
            resp = doc["components"]["responses"][resp["$ref"].rsplit("/", 1)[1]]
        return resp["content"]["application/json"]["schema"]

    for path, method in sorted(IMPLEMENTED):
        if method != "get" or path == "/metrics":
            continue
        status, body = weir.get(path)
        assert status == 200
        validate(doc, schema_of(path, "get", 200), body)
    validate(doc, schema_of("/api/v1/policy/reload", "post", 200),
             json.loads(weir.request("POST", "/api/v1/policy/reload", body={"dry_run": True})[2]))
    for path, method, req, code in [("/api/v1/flows?limit=0", "get", None, 400),
                                    ("/api/v1/policy/reload", "post", {"x": 1}, 400),
                                    ("/api/v1/status", "delete", None, 405),
                                    ("/api/v1/policy/reload", "post", "x" * 70000, 413)]:
        status, h, data = weir.request(method.upper(), path, body=req,
                                       headers={"Content-Type": "application/json"})
        assert status == code
        spath = path.split("?")[0]
        schema = (schema_of(spath, method, code) if method in doc["paths"][spath]
                  else {"$ref": "#/components/schemas/Error"})
        validate(doc, schema, json.loads(data))
    # The schemas are strict enough to catch a wrong answer.
    import jsonschema
    with pytest.raises(jsonschema.ValidationError):
        validate(doc, {"$ref": "#/components/schemas/Flows"}, {"total": 1, "offset": 0, "limit": 1,
                                                     "flows": [{"proto": "tcp"}]})


# ---- the bearer token ----

def test_token(tmp_path):
    token = "s3cret-token-0123456789"
    (tmp_path / "token").write_text(token + "\n")
    (tmp_path / "token").chmod(0o600)
    w = Weir(tmp_path, "token", extra=' token_file = "token";')
    try:
        for path in ("/api/v1/status", "/metrics", "/api/v1/openapi.json", "/nope"):
            status, h, data = w.request("GET", path)
            assert_error(status, h, data, 401)
            assert h["WWW-Authenticate"].startswith("Bearer")
        for wrong in ("Bearer " + token[:-1], "Bearer " + token + "x", "Basic " + token, token,
                      "Bearer", "Bearer " + token.upper()):
            assert_error(*w.request("GET", "/api/v1/status", headers={"Authorization": wrong}),
                         401)
        # Refused before the body is read.
        assert_error(*w.request("POST", "/api/v1/policy/reload", body={"dry_run": True}), 401)
        w.token = token
        assert w.get("/api/v1/status")[0] == 200
        assert w.request("GET", "/metrics")[0] == 200
        assert_error(*w.request("GET", "/nope"), 404)
    finally:
        w.stop()


# ---- TLS ----

def make_cert(d):
    """A self-signed certificate for 127.0.0.1 (cert.pem, key.pem in d), valid a day."""
    import shutil
    if not shutil.which("openssl"):
        pytest.skip("no openssl command to make a certificate")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1",
                    "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
                   check=True, capture_output=True, timeout=60)
    return d / "cert.pem"


def https_get(w, path, cafile):
    import ssl
    ctx = ssl.create_default_context(cafile=str(cafile))
    c = http.client.HTTPSConnection("127.0.0.1", w.port, timeout=10, context=ctx)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, json.loads(r.read())
    finally:
        c.close()


def test_tls(tmp_path):
    import ssl
    cert = make_cert(tmp_path)
    w = Weir(tmp_path, "tls", extra=' tls_cert = "cert.pem"; tls_key = "key.pem";')
    try:
        status, s = https_get(w, "/api/v1/status", cert)
        assert status == 200 and s["ports"]["lan"]["device"].startswith("net_pcap")
        # Plain HTTP to the TLS port gets no HTTP answer.
        with pytest.raises((http.client.HTTPException, OSError)):
            w.get("/api/v1/status")
        # A client that does not trust the certificate refuses it.
        other = tmp_path / "other"
        other.mkdir()
        with pytest.raises(ssl.SSLError):
            https_get(w, "/api/v1/status", make_cert(other))
        assert https_get(w, "/api/v1/classes", cert)[0] == 200
    finally:
        w.stop()


# ---- configuration ----

def check(tmp_path, management, files=()):
    for name, text in files:
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o600)      # a token file must be (TLS files may be)
    cfg = tmp_path / "weir.cfg"
    text = cfg_text(tag="chk", pid=0, port=0, extra="", lan="a", empty="b", lan_out="c",
                      wan_out="d").replace("management = { port = 0; };", management)
    cfg.write_text(text)
    p = subprocess.run([str(WEIR), "--", "--config", str(cfg), "--check"], capture_output=True,
                       text=True, timeout=30)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "management = {" in l)
    return p, f"{cfg}:{line}: "


@pytest.mark.parametrize("management,message", [
    ('management = { listen = "localhost"; };', "must be an IPv4 or IPv6 address"),
    ("management = { port = 65536; };", "'management.port' is 65536"),
    ("management = { port = \"80\"; };", "'management.port' must be an integer"),
    ("management = { bind = \"::\"; };", "unknown setting 'management.bind'"),
    ('management = { token_file = "missing"; };', "cannot read 'management.token_file'"),
    ('management = { token_file = "short"; };', "must be 16 to"),
    ('management = { tls_cert = "missing.pem"; tls_key = "short"; };',
     "cannot read 'management.tls_cert'"),
    ('management = { tls_cert = "short"; tls_key = "missing.pem"; };',
     "cannot read 'management.tls_key'"),
    ('management = { tls_cert = "short"; };', "'management.tls_cert' and 'management.tls_key' go"),
    ('management = { tls_key = "short"; };', "'management.tls_cert' and 'management.tls_key' go"),
])
def test_config_errors(tmp_path, management, message):
    p, where = check(tmp_path, management, files=[("short", "abc\n")])
    assert p.returncode != 0
    assert p.stderr.startswith(where) and message in p.stderr, p.stderr


def test_config_good(tmp_path):
    p, _ = check(tmp_path, 'management = { listen = "::1"; port = 9000; token_file = "t"; };',
                 files=[("t", "0123456789abcdef\n")])
    assert p.returncode == 0, p.stderr


def test_port_in_use(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        write_pcaps(tmp_path)
        cfg = tmp_path / "weir.cfg"
        cfg.write_text(cfg_text(tag="busy", pid=os.getpid(), port=port, extra="",
                                  lan=tmp_path / "lan.pcap", empty=tmp_path / "empty.pcap",
                                  lan_out=tmp_path / "lo.pcap", wan_out=tmp_path / "wo.pcap"))
        p = subprocess.run(["nice", "-n", "19", str(WEIR), "--", "--config", str(cfg)],
                           capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert f"cannot serve the REST API on 127.0.0.1 port {port}" in p.stderr, p.stderr
    assert re.search(r"mbufs in use after shutdown: 0 of", p.stdout), p.stdout


# ---- DPDK telemetry ----

def telemetry(w, tag, *cmds):
    """Each command's answer on the EAL's telemetry socket (SOCK_SEQPACKET, JSON)."""
    path = f"/var/run/dpdk/wrest-{tag}-{os.getpid()}/dpdk_telemetry.v2"
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(10)
        s.connect(path)
        assert "version" in json.loads(s.recv(65536))
        out = []
        for cmd in cmds:
            s.send(cmd.encode())
            out.append(json.loads(s.recv(1 << 20))[cmd.split(",")[0]])
        return out


def test_telemetry(weir):
    cmds, status, classes, counters, gold, bad = telemetry(
        weir, "main", "/", "/weir/status", "/weir/classes", "/weir/counters",
        "/weir/counters,shaping/outbound/classes/gold", "/weir/counters,nosuch")
    assert {"/weir/status", "/weir/classes", "/weir/counters"} <= set(cmds)
    # The snapshot of the last stats interval (1 s): the pcap was replayed before.
    assert status["version"] == weir.get("/api/v1/status")[1]["version"]
    assert status["flows/active"] == len(FLOWS) and status["flows/capacity"] == 1024
    assert status["ports/lan/rx"] == len(FLOWS) and status["mbufs/total"] == 8191
    assert float(status["uptime_s"]) > 0 and status["policy/epoch"] >= 1
    assert set(classes) == {"outbound/gold", "outbound/bulk", "inbound/default"}
    assert classes["outbound/gold"]["rate_bps"] == 20_000_000
    # (Their counts restart with every policy switch the tests above made.)
    assert classes["outbound/bulk"]["rate_bps"] == 10_000_000
    assert {"pkts", "bytes", "drops_flow", "queued_pkts", "flows"} <= \
        set(classes["inbound/default"])
    assert counters["ports"]["lan/rx"] == len(FLOWS) and counters["flows"]["active"] == len(FLOWS)
    assert counters["workers"]["0/lcore"] == 1
    assert gold == classes["outbound/gold"]
    assert bad is None


# ---- error text that is not valid UTF-8 (issue 17 #13) ----

def test_hook_error_not_utf8_keeps_monitoring_up(tmp_path):
    """A hook error that quotes raw bytes, and one long enough to be cut inside a
    multi-byte character, must not take /status, /counters or /metrics down: the
    snapshot carries a repaired message, cut on a character boundary."""
    w, script = script_weir(tmp_path, "utf8")
    try:
        # error(..., 0): no position prefix, so the message is what we build here.
        bad = script.read_text() + (
            '\nlocal n = 0\n'
            'weir.every(0.1, function(now)\n'
            '  n = n + 1\n'
            '  if n % 2 == 1 then error("raw \\255 byte", 0) end\n'
            '  error(string.rep("\\226\\130\\172", 400), 0)\n'   # 1200 bytes of euro signs
            'end)\n')
        status, _, data = put_script(w, bad)
        assert status == 200, data
        deadline = time.time() + 10
        seen = set()
        while time.time() < deadline and len(seen) < 2:
            for path in ("/api/v1/status", "/api/v1/counters", "/metrics"):
                status, _, data = w.request("GET", path)
                assert status == 200, (path, data)
            c = json.loads(w.request("GET", "/api/v1/counters")[2])
            err = c["hooks"]["last_error"]
            m = re.match(rf"{re.escape(str(script))}:\d+: (.*)$", err)
            if m and m.group(1).startswith("raw"):
                assert m.group(1) == "raw ? byte", err
                seen.add("raw")
            elif m and m.group(1).startswith("\u20ac"):
                assert set(m.group(1)) == {"\u20ac"} and len(err.encode()) <= 511, err
                seen.add("long")
            time.sleep(0.1)
        assert seen == {"raw", "long"}, seen
        assert c["hooks"]["errors"] >= 2
    finally:
        w.stop()


# ---- a policy switch a worker takes after the wait (issue 17 #11) ----

def test_switch_taken_late(tmp_path):
    """With WEIR_DEBUG_SWITCH_WAIT_US=1 the management side stops waiting before the
    worker takes a switch: every reload and PATCH goes in force late. The policy in force
    must stay readable, a second switch is refused only while the worker still holds
    the first, the old policy is freed once it took it, and shutdown frees everything
    once (run against an ASan build to see a use-after-free or double free directly)."""
    w = Weir(tmp_path, "late", env={"WEIR_DEBUG_SWITCH_WAIT_US": "1"})

    def switch(do):
        # Refused, changing nothing, while the worker still holds the last one.
        for _ in range(100):
            status, h, data = do()
            if status != 422 or b"try again" not in data:
                return status, data
            time.sleep(0.01)
        return status, data

    try:
        epoch = w.get("/api/v1/policy")[1]["epoch"]
        for i in range(3):
            status, data = switch(lambda: w.request("POST", "/api/v1/policy/reload"))
            assert status == 200, data
            epoch += 1
            status, data = switch(lambda: patch_class(w, "outbound/gold",
                                                      {"rate": f"{15 + i}mbit"}))
            assert status == 200, data
            epoch += 1
            assert json.loads(data)["epoch"] == epoch
            by = {k["name"]: k for k in w.get("/api/v1/classes")[1]["outbound"]["classes"]}
            assert by["gold"]["rate_bps"] == (15 + i) * 1_000_000
            for path in ("/api/v1/status", "/api/v1/counters", "/metrics"):
                assert w.request("GET", path)[0] == 200, path
        c = w.get("/api/v1/counters")[1]
        assert c["policy"]["epoch"] == epoch
        # (A worker may take one within the microsecond: most are late, not all.)
        assert c["policy"]["switches_late"] >= 3, c["policy"]
        assert c["policy"]["reload_failures"] == 0, c["policy"]
    finally:
        w.stop()

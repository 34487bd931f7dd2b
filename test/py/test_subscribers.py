"""Subscribers from LibreQoS's files, in the testbed with real TCP (docs/subscribers.md).

weir reads a ShapedDevices.csv and a network.json (two sites, four access points, 400
subscribers of which three are LAN hosts: l1 and l2 by their /32, l3 by a /24 that
also covers l1 and l2, so overlapping prefixes resolve by length). Three downloads run
at once: each subscriber's leaf carries its plan. Then a PATCH of one plan under
traffic is in force within the next second, and weir drops nothing for it. A re-read
of the files refuses one with bad rows (every row reported, nothing changed) and applies
only what changed in a good one.
"""
import json
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from conftest import measure_twice, weir_testbed  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from test_classes import Sampler  # noqa: E402
from weirtb.traffic import PYTHON  # noqa: E402

WEIRCTL = REPO / "scripts" / "weirctl"

MGMT_PORT = 8098
FILES = {}
STATS_INTERVAL = 0.2
# Download plans (Mbit/s) of the three LAN hosts' circuits: id, prefix, max.
PLANS = [("c-l1", "10.77.1.1", 3), ("c-l2", "10.77.1.2", 4), ("c-lan", "10.77.1.0/24", 2)]
HEADER = ("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,"
          "Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,"
          "Download Max Mbps,Upload Max Mbps,Comment,sqm\n")


def write_files(d):
    net = {f"Site{s}": {"downloadBandwidthMbps": 80, "uploadBandwidthMbps": 80, "type": "Site",
                        "children": {f"AP{s}{a}": {"downloadBandwidthMbps": 40,
                                                    "uploadBandwidthMbps": 40, "type": "AP"}
                                     for a in range(2)}}
           for s in range(2)}
    (d / "network.json").write_text(json.dumps(net, indent=1))
    rows = [f"{cid},{cid},d-{cid},cpe,AP{i % 2}{i // 2 % 2},,,,{pfx},,1,1,{mx},{mx / 2},,\n"
            for i, (cid, pfx, mx) in enumerate(PLANS)]
    rows += [f"f{i},filler {i},fd{i},cpe,AP{i % 2}{i // 2 % 2},,,,10.100.{i // 256}.{i % 256},"
             f"2001:db8:{i:x}::/56,1,1,20,10,,\n" for i in range(400)]
    (d / "ShapedDevices.csv").write_text(HEADER + "".join(rows))


def api(tb, path, method="GET", body=None):
    argv = ["curl", "-s", "-X", method, f"http://127.0.0.1:{MGMT_PORT}{path}"]
    if body is not None:
        argv += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    return json.loads(tb.run("gw", argv).stdout)


@pytest.fixture(scope="module")
def subs_tb(tmp_path_factory):
    d = tmp_path_factory.mktemp("subscribers")
    write_files(d)
    FILES["dir"] = d
    cfg = d / "subs.cfg"
    cfg.write_text(weirtb.testbed_config_text(
        'shaping = { outbound = "100mbit"; inbound = "100mbit"; };\n'
        'subscribers = { shaped_devices = "ShapedDevices.csv"; network = "network.json"; '
        'max = 1000; };\n'
        f"management = {{ port = {MGMT_PORT}; }};\n", stats_interval=STATS_INTERVAL))
    with weir_testbed(cfg, lan=3, wan=1, paths=[PathSpec(delay=5)]) as tb:
        yield tb


def port_drops(st):
    return sum(p.get("dropped", 0) for p in st["ports"].values()) if isinstance(
        st.get("ports"), dict) else sum(p.get("dropped", 0) for p in st.get("ports", []))


def test_plans_and_patch_under_traffic(subs_tb):
    tb = subs_tb
    listed = api(tb, "/api/v1/subscribers?limit=5")
    assert listed["total"] == 403 and len(listed["subscribers"]) == 5, listed
    one = api(tb, "/api/v1/subscribers/c-l2")
    assert one["download"]["max_bps"] == 4_000_000 and one["parent"] == "AP10", one
    # Bad requests: unknown id, above the node's 40 Mbit/s, min above max; nothing changes.
    assert api(tb, "/api/v1/subscribers/nobody", "PATCH", {"download_max": "5mbit"})["error"]["code"] == 404
    bad = api(tb, "/api/v1/subscribers/c-l2", "PATCH", {"download_max": "50mbit"})
    assert bad["error"]["code"] == 422 and "above its parent" in bad["error"]["message"], bad
    bad = api(tb, "/api/v1/subscribers/c-l2", "PATCH", {"download_min": "20mbit"})
    assert bad["error"]["code"] == 422, bad
    assert api(tb, "/api/v1/subscribers/c-l2")["download"]["max_bps"] == 4_000_000

    dur, t_patch, new_max = 16, 9, 2

    def run():
        # A second try starts from the file's plan again.
        api(tb, "/api/v1/subscribers/c-l2", "PATCH", {"download_max": "4mbit"})
        res = {}
        pairs = [(h, "w1") for h in ("l1", "l2", "l3")]
        with Sampler(tb, "inbound") as s:
            t0 = s.now()
            th = threading.Thread(target=lambda: res.__setitem__(
                "f", tb.iperf(n=3, duration=dur, reverse=True, pairs=pairs)), daemon=True)
            th.start()
            # The top subscribers by current rate, while the three downloads run.
            s.wait_until(t0 + 4)
            res["top"] = json.loads(tb.run("gw", [
                PYTHON, str(WEIRCTL), "--url", f"http://127.0.0.1:{MGMT_PORT}", "--json", "top",
                "--subscribers", "--count", "1", "--limit", "3"]).stdout)
            s.wait_until(t0 + t_patch)
            drops0 = port_drops(tb.weir_stats())
            tp = time.monotonic()
            res["patch"] = api(tb, "/api/v1/subscribers/c-l2", "PATCH",
                               {"download_max": f"{new_max}mbit"})
            res["patch_s"] = time.monotonic() - tp
            th.join()
            res["drops"] = port_drops(tb.weir_stats()) - drops0
        a, b = t0 + 3, t0 + t_patch - 0.5
        res["before"] = {cid: s.rate(cid, a, b) for cid, _, _ in PLANS}
        c = t0 + t_patch + 1.5
        res["after"] = s.rate("c-l2", c, c + 4)
        return res

    # Never above a plan (+3 %: sampling); below it by at most 10 %, which on the
    # shared 2-vCPU machine is the senders starving, not weir (the runs measured
    # here without other load were within 4 %: docs/subscribers.md).
    def within(got, plan):
        return plan * 0.90 <= got <= plan * 1.03

    def good(r):
        return (all(within(r["before"][cid], mx * 1e6) for cid, _, mx in PLANS)
                and within(r["after"], new_max * 1e6))

    r = measure_twice(run, good)
    ivs = [round(x / 1e6, 2) for x in r["f"][1].interval_bps]
    print(f"before {({k: round(v / 1e6, 2) for k, v in r['before'].items()})}, c-l2 after "
          f"{r['after'] / 1e6:.2f} (2), PATCH took {r['patch_s'] * 1e3:.0f} ms, l2's goodput "
          f"per second {ivs}, weir drops during the change {r['drops']}")
    assert all(f.error is None for f in r["f"]), [f.error for f in r["f"]]
    for cid, _, mx in PLANS:
        assert within(r["before"][cid], mx * 1e6), (cid, r["before"])
    assert r["patch"]["download"]["max_bps"] == new_max * 1_000_000, r["patch"]
    # weir's current rate per subscriber (frames' bytes, so a little above goodput).
    top = {u["id"]: u["download"]["rate_bps"] for u in r["top"]["subscribers"]}
    assert sorted(top) == sorted(cid for cid, _, _ in PLANS), r["top"]
    for cid, _, mx in PLANS:
        assert 0.8 * mx * 1e6 <= top[cid] <= 1.15 * mx * 1e6, (cid, top)
    assert within(r["after"], new_max * 1e6), r["after"]
    # In force within the next second: l2's goodput in the second after the PATCH
    # is at most the new plan (plus what queued at the old rate).
    assert ivs[t_patch + 1] <= new_max * 1.1, ivs
    assert r["drops"] == 0, r["drops"]
    # The top-N by bytes: the three circuits that carried traffic, through weirctl.
    top = tb.run("gw", [PYTHON, str(WEIRCTL), "--url", f"http://127.0.0.1:{MGMT_PORT}", "sub",
                        "list", "--sort", "bytes", "--limit", "3"]).stdout
    print(top)
    ids = [line.split()[0] for line in top.splitlines()[1:4]]
    assert sorted(ids) == sorted(cid for cid, _, _ in PLANS), top
    show = tb.run("gw", [PYTHON, str(WEIRCTL), "--url", f"http://127.0.0.1:{MGMT_PORT}", "sub",
                         "show", "c-l2"]).stdout
    assert "c-l2" in show and "10.77.1.2/32" in show, show
    # Prometheus: aggregates and a top-10, no series per subscriber.
    m = tb.run("gw", ["curl", "-s", f"http://127.0.0.1:{MGMT_PORT}/metrics"]).stdout
    assert "\nweir_subscribers 403" in m, m[:2000]
    assert 'weir_subscriber_top_bytes{direction="inbound",class="c-l1"' in m
    assert 'weir_subscribers_bytes_total{direction="inbound"}' in m
    assert 'class="f1"' not in m and 'weir_class_bytes_total{direction="inbound",class="AP00"}' in m


def test_reload_applies_what_changed(subs_tb):
    """POST /api/v1/subscribers/reload: a file with bad rows is refused with every
    bad row and nothing changes; a good one switches once with what changed; the
    same file again switches nothing."""
    tb, d = subs_tb, FILES["dir"]
    csv = d / "ShapedDevices.csv"
    good = csv.read_text()
    epoch = api(tb, "/api/v1/classes")["epoch"]
    csv.write_text(good + "bad1,x,db1,cpe,Nowhere,,,,10.200.0.1,,1,1,5,5,,\n"
                   "bad2,x,db2,cpe,AP00,,,,10.100.0.0,,1,1,5,5,,\n"
                   "bad3,x,db3,cpe,AP00,,,,10.201.0.1,,9,1,5,5,,\n")
    r = api(tb, "/api/v1/subscribers/reload", "POST")
    probs = r["error"]["problems"]
    assert r["error"]["code"] == 422 and len(probs) == 3, r
    assert any(":405: circuit 'bad1': unknown parent node 'Nowhere'" in p for p in probs), probs
    assert any(":406: prefix 10.100.0.0/32" in p for p in probs), probs
    assert any(":407: circuit 'bad3': download min" in p for p in probs), probs
    assert api(tb, "/api/v1/classes")["epoch"] == epoch
    assert api(tb, "/api/v1/subscribers")["total"] == 403
    # A PATCHed plan is part of the set in force, so the re-read also takes c-l2's
    # back to the file's (4 Mbit/s) when the test above changed it.
    rates = 1 + (api(tb, "/api/v1/subscribers/c-l2")["download"]["max_bps"] != 4_000_000)
    csv.write_text(good.replace("c-l1,c-l1,d-c-l1,cpe,AP00,,,,10.77.1.1,,1,1,3,1.5",
                                "c-l1,c-l1,d-c-l1,cpe,AP00,,,,10.77.1.1,,1,1,2.5,1.5")
                   + "new1,new,dn1,cpe,AP11,,,,10.202.0.0/24,,1,1,7,7,,\n")
    r = api(tb, "/api/v1/subscribers/reload", "POST")
    assert r["switched"] and r["diff"]["added"] == 1 and r["diff"]["rates"] == rates, r
    assert r["diff"]["removed"] == 0 and r["diff"]["unchanged"] == 403 - rates, r
    assert api(tb, "/api/v1/subscribers/c-l1")["download"]["max_bps"] == 2_500_000
    assert api(tb, "/api/v1/subscribers/new1")["download"]["max_bps"] == 7_000_000
    out = tb.run("gw", [PYTHON, str(WEIRCTL), "--url", f"http://127.0.0.1:{MGMT_PORT}", "sub",
                        "reload"]).stdout
    assert out.startswith("nothing changed"), out


def api_file(tb, path, method, body, ctype="application/json"):
    """A request with a large body (from a file), and its HTTP status."""
    f = FILES["dir"] / "body"
    f.write_text(body if isinstance(body, str) else json.dumps(body))
    out = tb.run("gw", ["curl", "-s", "-w", "\n%{http_code}", "-X", method, "-H",
                        f"Content-Type: {ctype}", "--data-binary", f"@{f}",
                        f"http://127.0.0.1:{MGMT_PORT}{path}"]).stdout
    text, code = out.rsplit("\n", 1)
    return int(code), json.loads(text)


def test_put_delete_batch_and_upload(subs_tb):
    """One subscriber created, refused (a prefix taken 409, above its parent or min above
    max 422), deleted; a batch refused item by item, then applied whole; a full class tree
    refused (507) and counted; a ShapedDevices.csv uploaded: bad rows refused by FILE:LINE,
    a good one applied (its diff only) and written over the configured file."""
    tb, d = subs_tb, FILES["dir"]
    total = api(tb, "/api/v1/subscribers")["total"]
    new = {"name": "New one", "parent": "AP00", "download_max": "5mbit", "upload_max": "2mbit",
           "download_min": "1mbit", "prefixes": ["10.210.0.0/24", "2001:db8:ffff::/48"],
           "macs": ["02:00:00:00:00:01"]}
    code, r = api_file(tb, "/api/v1/subscribers/s-new", "PUT", new)
    assert code == 201 and r["download"]["max_bps"] == 5_000_000 and r["parent"] == "AP00", r
    assert r["prefixes"] == ["10.210.0.0/24", "2001:db8:ffff::/48"], r
    code, r = api_file(tb, "/api/v1/subscribers/s-two", "PUT", {**new, "prefixes": ["10.210.0.0/24"]})
    assert code == 409 and "'s-new'" in r["error"]["message"], r
    code, r = api_file(tb, "/api/v1/subscribers/s-two", "PUT", {**new, "download_max": "50mbit"})
    assert code == 422 and "above its parent" in r["error"]["message"], r
    code, r = api_file(tb, "/api/v1/subscribers/s-two", "PUT", {**new, "download_min": "9mbit"})
    assert code == 422 and "above its max" in r["error"]["message"], r
    code, r = api_file(tb, "/api/v1/subscribers/s-new", "PATCH", {"upload_max": "3mbit"})
    assert code == 200 and r["upload"]["max_bps"] == 3_000_000 and r["name"] == "New one", r
    assert api(tb, "/api/v1/subscribers/nobody", "DELETE")["error"]["code"] == 404
    assert api(tb, "/api/v1/subscribers/s-new", "DELETE")["deleted"] is True
    assert api(tb, "/api/v1/subscribers/s-new")["error"]["code"] == 404
    assert api(tb, "/api/v1/subscribers")["total"] == total

    # A batch: all or nothing, every bad item with its index.
    epoch = api(tb, "/api/v1/classes")["epoch"]
    batch = [{**new, "id": "b1"}, {**new, "id": "b2", "prefixes": ["10.100.0.5"]},
             {"id": "ghost", "delete": True}, {**new, "id": "b3", "prefixes": ["10.211.0.1"],
                                                "upload_min": "8mbit"}]
    code, r = api_file(tb, "/api/v1/subscribers", "POST", batch)
    probs = {p["index"]: p for p in r["error"]["problems"]}
    assert code == 422 and sorted(probs) == [1, 2, 3], r
    assert probs[1]["status"] == 409 and "'f5'" in probs[1]["reason"], probs
    assert probs[2]["status"] == 404 and probs[3]["status"] == 422, probs
    assert api(tb, "/api/v1/classes")["epoch"] == epoch
    code, r = api_file(tb, "/api/v1/subscribers", "POST", [
        {**new, "id": "b1"}, {**new, "id": "b2", "prefixes": ["10.211.0.2"]},
        {"id": "f0", "delete": True}])
    assert code == 200 and r["diff"]["added"] == 2 and r["diff"]["removed"] == 1, r
    assert api(tb, "/api/v1/subscribers")["total"] == total + 1

    # More subscribers than this box takes (subscribers.max): refused whole and counted.
    many = [{"id": f"m{i}", "parent": "AP01", "download_max": 1000000, "upload_max": 1000000,
             "prefixes": [f"10.220.{i // 256}.{i % 256}"]} for i in range(700)]
    code, r = api_file(tb, "/api/v1/subscribers", "POST", many)
    assert code == 507 and "subscribers.max" in r["error"]["message"], r
    assert api(tb, "/api/v1/counters")["policy"]["subscribers_full"] >= 1
    assert "\nweir_subscribers_full_total 1" in tb.run("gw", [
        "curl", "-s", f"http://127.0.0.1:{MGMT_PORT}/metrics"]).stdout
    assert api(tb, "/api/v1/subscribers")["total"] == total + 1

    # The file uploaded (what weir-push sends): checked as a re-read, then written.
    csv = d / "ShapedDevices.csv"
    good = csv.read_text()
    code, r = api_file(tb, "/api/v1/subscribers", "PUT", good + "up1,u,du1,cpe,Nowhere,,,,"
                       "10.230.0.1,,1,1,5,5,,\n", ctype="text/csv")
    line = len(good.splitlines()) + 1
    assert code == 422 and r["error"]["problems"] == [
        f"{csv}:{line}: circuit 'up1': unknown parent node 'Nowhere'"], r
    assert csv.read_text() == good
    up = good + "up1,u,du1,cpe,AP10,,,,10.230.0.1,,1,1,5,5,,\n"
    # Against the set in force: up1 and f0 (deleted by the batch) come, b1 and b2 go.
    code, r = api_file(tb, "/api/v1/subscribers?dry_run=true", "PUT", up, ctype="text/csv")
    assert code == 200 and r["dry_run"] and r["diff"]["added"] == 2 and csv.read_text() == good
    code, r = api_file(tb, "/api/v1/subscribers", "PUT", up, ctype="text/csv")
    assert code == 200 and r["switched"] and r["diff"]["added"] == 2, r
    assert r["diff"]["removed"] == 2 and csv.read_text() == up
    assert api(tb, "/api/v1/subscribers/up1")["parent"] == "AP10"
    # network.json likewise: a syntax error at its line; a good one changes the nodes only.
    net = d / "network.json"
    good_net = net.read_text()
    code, r = api_file(tb, "/api/v1/subscribers/network", "PUT", good_net[:-2] + ",,\n}\n")
    assert code == 422 and r["error"]["problems"][0].startswith(f"{net}:"), r
    assert net.read_text() == good_net
    code, r = api_file(tb, "/api/v1/subscribers/network", "PUT",
                       good_net.replace('"downloadBandwidthMbps": 80', '"downloadBandwidthMbps": 70'))
    assert code == 200 and r["diff"]["nodes_changed"] and r["diff"]["added"] == 0, r
    assert '"downloadBandwidthMbps": 70' in net.read_text()
    # weirctl's sub add / set / rm.
    ctl = [PYTHON, str(WEIRCTL), "--url", f"http://127.0.0.1:{MGMT_PORT}", "sub"]
    out = tb.run("gw", ctl + ["add", "w1", "--parent", "AP01", "--download-max", "6mbit",
                              "--upload-max", "3mbit", "--prefix", "10.240.0.1"]).stdout
    assert "in force" in out and "10.240.0.1/32" in out, out
    tb.run("gw", ctl + ["set", "w1", "--shaping", "off", "--download-max", "7mbit"])
    w1 = api(tb, "/api/v1/subscribers/w1")
    assert w1["shaping"] is False and w1["parent"] == "AP01", w1
    out = tb.run("gw", ctl + ["rm", "w1", "up1"]).stdout
    assert "removed" in out and api(tb, "/api/v1/subscribers/w1")["error"]["code"] == 404, out


def test_lua_subscriber(tmp_path):
    """weir.subscriber{} in a policy script: its subscribers are leaves as a file's are and
    take the API's changes; a bad field is refused as SCRIPT:LINE, the policy in force kept."""
    from test_rest import put_script, script_weir
    w, script = script_weir(tmp_path, "luasubs")
    try:
        base = script.read_text()
        good = base + ('\nweir.subscriber{ id = "lua1", name = "Lua one", down = { max = "8mbit" },'
                       ' up = { min = "1mbit", max = "4mbit" }, prefixes = { "10.0.0.1", '
                       '"2001:db8::/64" } }\n'
                       'weir.subscriber{ id = "lua2", down = { max = 5000000 }, up = { max = '
                       '"2mbit" }, prefixes = { "10.0.0.2" }, shaping = false }\n')
        status, _, data = put_script(w, good)
        assert status == 200, data
        subs = {u["id"]: u for u in w.get("/api/v1/subscribers")[1]["subscribers"]}
        assert subs["lua1"]["download"]["max_bps"] == 8_000_000, subs
        assert subs["lua1"]["upload"]["min_bps"] == 1_000_000 and not subs["lua2"]["shaping"]
        assert subs["lua1"]["prefixes"] == ["10.0.0.1/32", "2001:db8::/64"], subs
        status, _, data = w.request("PATCH", "/api/v1/subscribers/lua1",
                                    body={"download_max": "6mbit"})
        assert status == 200 and json.loads(data)["download"]["max_bps"] == 6_000_000, data
        line = len(good.splitlines()) + 1
        for bad, why in [('weir.subscriber{ id = "b", down = { max = "1mbit" } }', "'up'"),
                         ('weir.subscriber{ id = "b", down = { max = "1mbit" }, up = { max = '
                          '"1mbit" }, prefixes = { "10.0.0.300" } }', "10.0.0.300"),
                         ('weir.subscriber{ id = "b", down = { max = "1mbit" }, up = { max = '
                          '"1mbit" }, prefixes = { "10.0.0.1" } }', "lua1")]:
            status, _, data = put_script(w, good + bad + "\n")
            msg = json.loads(data)["error"]["message"]
            assert status == 422 and f"{script}:{line}:" in msg and why in msg, msg
        assert w.get("/api/v1/subscribers/lua1")[1]["download"]["max_bps"] == 6_000_000
    finally:
        w.stop()


def test_plan_change_in_place(subs_tb):
    """A PATCH and a rates-only re-read go in place (subs_live.c): no policy switch (the
    epoch stays), the subscriber's class counters keep counting, every worker took the
    change (class_cmds.applied), the new plan holds within the next second and weir
    drops nothing for it."""
    tb, d = subs_tb, FILES["dir"]
    epoch = api(tb, "/api/v1/classes")["epoch"]
    plan = api(tb, "/api/v1/subscribers/c-l1")["download"]["max_bps"]
    new = plan * 0.6
    dur, t_patch = 8, 3
    res = {}
    with Sampler(tb, "inbound") as s:
        t0 = s.now()
        th = threading.Thread(target=lambda: res.__setitem__(
            "f", tb.iperf(n=1, duration=dur, reverse=True, pairs=[("l1", "w1")])), daemon=True)
        th.start()
        s.wait_until(t0 + t_patch)
        st0 = tb.weir_stats()
        applied0 = sum(w["class_cmds"]["applied"] for w in st0["workers"])
        bytes0 = st0["shaping"]["inbound"]["classes"]["c-l1"]["bytes"]
        r = api(tb, "/api/v1/subscribers/c-l1", "PATCH", {"download_max": int(new)})
        th.join()
        st1 = tb.weir_stats()
    c = t0 + t_patch + 1
    after = s.rate("c-l1", c, t0 + dur - 0.5)
    before = s.rate("c-l1", t0 + 1, t0 + t_patch)
    print(f"c-l1 {before / 1e6:.2f} Mbit/s at {plan / 1e6:g}, then {after / 1e6:.2f} at "
          f"{new / 1e6:g}; class_cmds {[w['class_cmds'] for w in st1['workers']]}")
    assert res["f"][0].error is None, res["f"][0].error
    assert r.get("in_place") is True and r["epoch"] == epoch, r
    assert r["download"]["max_bps"] == int(new), r
    assert api(tb, "/api/v1/classes")["epoch"] == epoch
    assert sum(w["class_cmds"]["applied"] for w in st1["workers"]) > applied0
    assert all(w["class_cmds"]["failed"] == 0 for w in st1["workers"]), st1["workers"]
    # Counters kept: what the leaf counted before the change is still in its total.
    assert st1["shaping"]["inbound"]["classes"]["c-l1"]["bytes"] > bytes0
    assert port_drops(st1) == port_drops(st0), (port_drops(st0), port_drops(st1))
    assert new * 0.85 <= after <= new * 1.03, after
    # A re-read where only a plan changed: in place as well, no switch. (First one that
    # brings the set in force back to the files, which earlier tests changed through the API.)
    epoch = api(tb, "/api/v1/subscribers/reload", "POST")["epoch"]
    csv = d / "ShapedDevices.csv"
    text = csv.read_text()
    row = next(line for line in text.splitlines() if line.startswith("c-l2,"))
    f = row.split(",")
    f[12] = "3.5"
    csv.write_text(text.replace(row, ",".join(f)))
    r = api(tb, "/api/v1/subscribers/reload", "POST")
    assert r.get("in_place") is True and not r["switched"] and r["epoch"] == epoch, r
    assert r["diff"]["rates"] >= 1 and r["diff"]["added"] == 0, r
    assert api(tb, "/api/v1/subscribers/c-l2")["download"]["max_bps"] == 3_500_000
    m = tb.run("gw", ["curl", "-s", f"http://127.0.0.1:{MGMT_PORT}/metrics"]).stdout
    assert 'weir_worker_class_cmds_total{worker="0",result="applied"}' in m

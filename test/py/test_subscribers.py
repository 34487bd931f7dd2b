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
        'subscribers = { shaped_devices = "ShapedDevices.csv"; network = "network.json"; };\n'
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
    csv.write_text(good.replace("c-l1,c-l1,d-c-l1,cpe,AP00,,,,10.77.1.1,,1,1,3,1.5",
                                "c-l1,c-l1,d-c-l1,cpe,AP00,,,,10.77.1.1,,1,1,2.5,1.5")
                   + "new1,new,dn1,cpe,AP11,,,,10.202.0.0/24,,1,1,7,7,,\n")
    r = api(tb, "/api/v1/subscribers/reload", "POST")
    # Rates: c-l1's new file plan, and c-l2's PATCHed plan (in the set in force since
    # PATCHes change it in place) going back to the file's.
    assert r["switched"] and r["diff"]["added"] == 1 and r["diff"]["rates"] == 2, r
    assert r["diff"]["removed"] == 0 and r["diff"]["unchanged"] == 401, r
    assert api(tb, "/api/v1/subscribers/c-l2")["download"]["max_bps"] == 4_000_000
    assert api(tb, "/api/v1/subscribers/c-l1")["download"]["max_bps"] == 2_500_000
    assert api(tb, "/api/v1/subscribers/new1")["download"]["max_bps"] == 7_000_000
    out = tb.run("gw", [PYTHON, str(WEIRCTL), "--url", f"http://127.0.0.1:{MGMT_PORT}", "sub",
                        "reload"]).stdout
    assert out.startswith("nothing changed"), out


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
    # A re-read where only a plan changed: in place as well, no switch.
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

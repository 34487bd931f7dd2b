"""A fleet of weir boxes (docs/fleet.md): weir-push and weirctl against two weir processes,
the fleet's Prometheus/Grafana files, and an HA pair failing over between FRR routers
(OSPF with BFD) in namespaces, fail-closed.

The long form (10 kills, TCP survival, plans after failover) is scripts/fleet_experiments.py;
results in docs/results/fleet/.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_rest import REPO, Weir, script_weir

PUSH = REPO / "scripts" / "weir-push"
WEIRCTL = REPO / "scripts" / "weirctl"
FLEETDIR = REPO / "dist" / "fleet"

root = pytest.mark.skipif(os.geteuid() != 0, reason="weir on net_pcap ports is run as root")


def run(*argv, ok=(0,)):
    p = subprocess.run([sys.executable, *map(str, argv)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode in ok, (p.returncode, p.stdout, p.stderr)
    return p


@pytest.fixture(scope="module")
def two_boxes(tmp_path_factory):
    """Two weir processes with Lua policies, each its own API (boxes b1 and b2)."""
    boxes = []
    try:
        for name in ("b1", "b2"):
            w, script = script_weir(tmp_path_factory.mktemp(name), f"fleet-{name}")
            boxes.append((name, w, script))
        yield boxes
    finally:
        for _, w, _ in boxes:
            w.stop()


@root
def test_push_policy_to_two_boxes(two_boxes, tmp_path):
    (_, w1, s1), (_, w2, s2) = two_boxes
    fleet = tmp_path / "fleet"
    fleet.write_text("# the test's fleet\n" + "".join(
        f"{n} http://127.0.0.1:{w.port} partitions=p{i}\n"
        for i, (n, w, _) in enumerate(two_boxes, 1)))
    epochs = [w.get("/api/v1/policy")[1]["epoch"] for _, w, _ in two_boxes]
    new = tmp_path / "policy.lua"
    new.write_text(s1.read_text().replace('"bulk"', '"guests"'))

    r = json.loads(run(PUSH, "--fleet", fleet, "policy", new, "--json").stdout)
    assert [x["box"] for x in r["results"]] == ["b1", "b2"]
    for x, e0 in zip(r["results"], epochs):
        assert x["ok"] and x["status"] == 200 and x["epoch"] > e0, x
    for _, w, s in two_boxes:
        assert s.read_text() == new.read_text()     # written over each box's script
        assert "guests" in {k["name"] for k in w.get("/api/v1/classes")[1]["outbound"]["classes"]}

    # A broken script: every box refuses it with weir's FILE:LINE, keeps the one in force.
    bad = tmp_path / "bad.lua"
    bad.write_text(new.read_text() + "\nthis is not lua\n")
    p = run(PUSH, "--fleet", fleet, "policy", bad, "--json", ok=(1,))
    r = json.loads(p.stdout)
    for x, (_, w, s) in zip(r["results"], two_boxes):
        assert not x["ok"] and x["status"] == 422 and ":" in x["error"], x
        assert s.read_text() == new.read_text()
    # Text form: one row per box and the exit status says some refused.
    p = run(PUSH, "--fleet", fleet, "policy", bad, ok=(1,))
    lines = p.stdout.splitlines()
    assert lines[0].split()[:3] == ["BOX", "URL", "RESULT"] and len(lines) == 3
    assert all(" refused " in ln for ln in lines[1:])

    # A config reload on every box, checked first (dry run), and one box unreachable.
    r = json.loads(run(PUSH, "--fleet", fleet, "reload", "--check", "--json").stdout)
    assert all(x["ok"] for x in r["results"])
    p = run(PUSH, "--fleet", fleet, "--box", "gone=http://127.0.0.1:9", "reload", "--json",
            ok=(2,))
    r = json.loads(p.stdout)
    by = {x["box"]: x for x in r["results"]}
    assert by["b1"]["ok"] and by["b2"]["ok"] and by["gone"]["status"] is None
    assert by["gone"]["error"].startswith("unreachable")


SUBS_HEADER = ("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,"
               "Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,Box\n")


@root
def test_push_shaped_devices_to_two_boxes(tmp_path_factory, tmp_path):
    """weir-push's shaped-devices against two weir processes, each box its partition: each
    takes its rows and the shared ones and writes them over its file; a file with a bad row
    is refused by both with FILE:LINE, and both keep theirs."""
    boxes = []
    try:
        for i in (1, 2):
            d = tmp_path_factory.mktemp(f"subs{i}")
            (d / "ShapedDevices.csv").write_text(SUBS_HEADER + f"c0,zero,d0,r0,,,100.64.9.{i},,"
                                                 "1,1,5,5,,\n")
            boxes.append(Weir(d, f"push-subs{i}", edit=lambda t, i=i: t + (
                f'subscribers = {{ shaped_devices = "ShapedDevices.csv"; box = {i}; }};\n')))
        fleet = tmp_path / "fleet"
        fleet.write_text("".join(f"b{i} http://127.0.0.1:{w.port} partitions={i}\n"
                                 for i, w in enumerate(boxes, 1)))
        csvf = tmp_path / "ShapedDevices.csv"
        csvf.write_text(SUBS_HEADER + "c1,one,d1,r1,,,100.64.0.1,,1,1,10,5,,1\n"
                        "c2,two,d2,r2,,,100.64.0.2,,1,1,10,5,,2\n"
                        "c3,three,d3,r3,,,100.64.0.3,,1,1,10,5,,\n")
        r = json.loads(run(PUSH, "--fleet", fleet, "shaped-devices", csvf, "--json").stdout)
        assert all(x["ok"] and x["status"] == 200 for x in r["results"]), r
        for w, mine in zip(boxes, ("c1", "c2")):
            ids = {s["id"] for s in w.get("/api/v1/subscribers")[1]["subscribers"]}
            assert ids == {mine, "c3"}, ids
            assert "c0," not in (w.dir / "ShapedDevices.csv").read_text()
        written = [(w.dir / "ShapedDevices.csv").read_text() for w in boxes]
        bad = tmp_path / "bad.csv"
        bad.write_text(csvf.read_text() + "c4,four,d4,r4,,,100.64.0.4,,9,1,5,5,,\n")
        r = json.loads(run(PUSH, "--fleet", fleet, "shaped-devices", bad, "--json",
                           ok=(1,)).stdout)
        for x, w in zip(r["results"], boxes):
            assert x["status"] == 422 and f"{w.dir / 'ShapedDevices.csv'}:4:" in x["error"], x
        assert [(w.dir / "ShapedDevices.csv").read_text() for w in boxes] == written
    finally:
        for w in boxes:
            w.stop()


def test_push_cuts_a_csv_by_partition(tmp_path):
    """A ShapedDevices.csv with a partition column: each box gets its partitions' rows and
    the shared ones; rows of a partition no box serves are reported (--plan sends nothing)."""
    csvf = tmp_path / "ShapedDevices.csv"
    csvf.write_text(
        "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,"
        "Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,Partition\n"
        "c1,one,d1,r1,site1,,100.64.0.1,,10,2,20,4,,p1\n"
        "c2,two,d2,r2,site1,,100.64.0.2,,10,2,20,4,,p2\n"
        "c3,three,d3,r3,site2,,100.64.0.3,,10,2,20,4,,\n"
        "c4,four,d4,r4,site2,,100.64.0.4,,10,2,20,4,,p9\n")
    fleet = tmp_path / "fleet"
    fleet.write_text("a http://192.0.2.1:8080 partitions=p1\n"
                     "b http://192.0.2.2:8080 partitions=p1,p2\n"
                     "c http://192.0.2.3:8080 partitions=p2\n")
    r = json.loads(run(PUSH, "--fleet", fleet, "shaped-devices", csvf, "--plan").stdout)
    rows = {x["box"]: x["rows"] for x in r["plan"]}
    assert rows == {"a": 2, "b": 3, "c": 2}
    assert r["unserved"] == {"p9": 1}
    # Bad usage: no FILE for a kind that needs one, --check where there is no dry run.
    assert run(PUSH, "--fleet", fleet, "policy", ok=(2,)).returncode == 2
    assert run(PUSH, "--fleet", fleet, "policy", csvf, "--check", ok=(2,)).returncode == 2
    fleet.write_text("a notaurl\n")
    p = run(PUSH, "--fleet", fleet, "reload", ok=(2,))
    assert f"{fleet}:1:" in p.stderr


@root
def test_weirctl_fleet_status_and_top(two_boxes):
    urls = ",".join(f"http://127.0.0.1:{w.port}" for _, w, _ in two_boxes)
    r = json.loads(run(WEIRCTL, "--url", urls, "--json", "status").stdout)
    assert [b["url"] for b in r["boxes"]] == urls.split(",")
    assert all(b["status"]["ports"]["lan"]["device"].startswith("net_pcap") for b in r["boxes"])
    p = run(WEIRCTL, "--url", urls, "status")
    assert "fleet: 2 of 2 boxes answered" in p.stdout
    # One box down: the others still shown, exit status 2.
    p = run(WEIRCTL, "--url", urls, "--url", "http://127.0.0.1:9", "status", ok=(2,))
    assert "fleet: 2 of 3 boxes answered" in p.stdout
    t = json.loads(run(WEIRCTL, "--url", urls, "--json", "top", "--count", "1",
                       "--interval", "0.3").stdout)
    assert len(t["boxes"]) == 2 and all("classes" in b for b in t["boxes"])
    p = run(WEIRCTL, "--url", urls, "top", "--count", "1", "--interval", "0.3")
    assert "weir top, 2 boxes" in p.stdout and p.stdout.count("MEASURED") == 1
    assert all(u in p.stdout for u in urls.split(",")), p.stdout
    # Commands that change or list one box take one --url.
    assert run(WEIRCTL, "--url", urls, "classes", ok=(2,)).returncode == 2


def test_prometheus_and_grafana_files(tmp_path):
    import yaml
    prom = yaml.safe_load((FLEETDIR / "prometheus.yml").read_text())
    job = prom["scrape_configs"][0]
    assert job["job_name"] == "weir" and job["metrics_path"] == "/metrics"
    boxes = yaml.safe_load((FLEETDIR / "weir-boxes.yml").read_text())
    assert all({"box", "partition", "role"} <= set(b["labels"]) for b in boxes)
    rules = yaml.safe_load((FLEETDIR / "weir-rules.yml").read_text())
    assert rules["groups"][0]["rules"]
    dash = json.loads((FLEETDIR / "grafana-weir-fleet.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    # Every metric the dashboard asks for is one weir serves (app/weir/metrics.c).
    metrics = (REPO / "app" / "weir" / "metrics.c").read_text()
    import re
    for name in {m for e in exprs for m in re.findall(r"\b(weir_[a-z_]+)\b", e)}:
        assert f'"{name}"' in metrics, name
    for e in exprs:
        assert "$partition" in e and "$box" in e
    # Debian's prometheus package brings promtool (not in install-deps: optional here).
    if shutil.which("promtool"):
        for f in FLEETDIR.iterdir():
            (tmp_path / f.name).write_text(f.read_text().replace("/etc/prometheus/",
                                                                 f"{tmp_path}/"))
        p = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
                           capture_output=True, text=True)
        assert p.returncode == 0 and "SUCCESS: 1 rule files found" in p.stdout, \
            p.stdout + p.stderr


# ---- the HA pair in namespaces ----

@pytest.fixture(scope="module")
def fleet():
    if os.geteuid() != 0:
        pytest.skip("namespaces need root")
    from weirtb import fleet as fl
    why = fl.frr_missing()
    if why:
        pytest.skip(why)
    f = fl.Fleet(on_failure="closed")
    try:
        f.up()
        yield f
    finally:
        f.down()


def test_failover_fail_closed(fleet):
    """Kill the active box (SIGKILL) under traffic: the routers' BFD sees it and traffic
    flows through the standby; the unit's hook takes the dead box's links down; routers'
    hellos crossed both boxes unshaped (l3_control); a clean stop of a fail-closed box
    takes its links down itself."""
    import fleet_experiments as fx
    for box in ("a", "b"):
        s = fleet.stats(box)["ports"]
        # OSPF hellos and BFD cross each box as L3 control, both ways.
        assert s["lan"]["l3_control"] > 0 and s["wan"]["l3_control"] > 0, s
        assert s["lan"]["l3_control_dropped"] == 0
    assert fleet.active_box() == "a"
    res = fx.one_kill(fleet, kill_at=1.5, after=3.5, hook=True, conns=4)
    print(json.dumps(res))
    # Well under a second on an idle machine (docs/results/fleet); CI's shared cores
    # get a loose bound.
    assert res["failover_ms"] is not None and res["failover_ms"] < 2500, res
    assert res["active_after"] == "b" and res["b_forwarded"] > 1000, res
    assert res["tcp_survived"] == 4, res
    # The hook (ExecStopPost) took A's links down: fail-closed.
    assert fleet.links("a") == {"lan": False, "wan": False}
    assert "closed mode" in fleet.hook("a", "status").stdout
    fleet.hook("a", "close")
    assert fleet.links("a") == {"lan": True, "wan": True}
    # A clean stop of B (fail-closed): weir itself sets its links down.
    assert fleet.links("b") == {"lan": True, "wan": True}
    assert fleet.stop_weir("b") == 0
    assert "fail-closed: lan port's link set down" in fleet.log_tail("b", 80)
    assert fleet.links("b") == {"lan": False, "wan": False}


def test_hook_fail_open_default(tmp_path):
    """Without ports.on_failure (the standalone default) the hook still bridges: it reads
    the mode from the config, and WEIR_ON_FAILURE overrides it."""
    cfg = tmp_path / "weir.cfg"
    cfg.write_text('ports = {\n  lan = { device = "net_af_packet0,iface=x1"; };\n'
                   '  wan = { device = "net_af_packet1,iface=x2"; };\n};\n')
    hook = REPO / "dist" / "weir-failopen"
    env = {**os.environ, "WEIR_FAILOPEN_IP": "echo ip"}
    p = subprocess.run([str(hook), "open", str(cfg)], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "bridged in the kernel" in p.stdout, p.stdout + p.stderr
    cfg.write_text(cfg.read_text().replace("ports = {\n", 'ports = {\n  on_failure = "closed";\n'))
    p = subprocess.run([str(hook), "open", str(cfg)], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "ip link set dev x1 down" in p.stdout, p.stdout + p.stderr
    p = subprocess.run([str(hook), "open", str(cfg)], capture_output=True, text=True,
                       env={**env, "WEIR_ON_FAILURE": "sideways"})
    assert p.returncode == 2 and "expected open or closed" in p.stderr


def test_config_settings(tmp_path):
    """ports.on_failure and worker.l3_control(_pps) are checked as every setting is:
    FILE:LINE and the problem."""
    weir = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build")) / "app" / "weir" / "weir"
    if not os.access(weir, os.X_OK):
        pytest.skip(f"{weir} not built")
    base = ('ports = {\n  lan = { device = "net_null0"; };\n  wan = { device = "net_null1"; };\n'
            '  on_failure = "%s";\n};\nworker = { l3_control = %s; l3_control_pps = %s; };\n')
    cfg = tmp_path / "w.cfg"

    def check(*vals):
        cfg.write_text(base % vals)
        return subprocess.run([str(weir), "--", "--config", str(cfg), "--check"],
                              capture_output=True, text=True)
    assert check("closed", "false", "0").returncode == 0
    p = check("sideways", "true", "10")
    assert p.returncode != 0 and f"{cfg}:4:" in p.stderr and "on_failure" in p.stderr, p.stderr
    p = check("open", "true", "-1")
    assert p.returncode != 0 and f"{cfg}:6:" in p.stderr and "l3_control_pps" in p.stderr, p.stderr

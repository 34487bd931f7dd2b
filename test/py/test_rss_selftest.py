"""Real-NIC readiness (issue 18.3), what can run without a NIC:

- the NIC config examples (conf/nic-intel.cfg, conf/nic-mlx5.cfg) pass `weir --check`;
- weir with two workers on two net_tap ports (the PMD here that takes an RSS
  configuration) goes through the RSS path: rte_flow's symmetric function is asked for,
  the symmetric key is the fallback, the start-up self-test runs, and what it found is
  logged and in the stats file's `distribution` object. net_tap cannot report its key
  here, so the check says "unverified" (a NIC that reports it is checked in software:
  test/unit/test_rss_check.c covers that model)."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WEIR = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build")) / "app" / "weir" / "weir"

pytestmark = pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}")


@pytest.mark.parametrize("name", ["nic-intel.cfg", "nic-mlx5.cfg"])
def test_nic_examples_check(name):
    r = subprocess.run([str(WEIR), "--", "--config", str(REPO / "conf" / name), "--check"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_rss_path_on_net_tap(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("net_tap needs root")
    ns = f"{os.environ.get('WEIRTB_NS_PREFIX', 'wtb-')}rss{os.getpid()}"
    stats = tmp_path / "stats.json"
    cfg = tmp_path / "weir.cfg"
    cfg.write_text(f"""
eal = ["--no-huge", "-m", "512", "--no-pci", "--file-prefix=wrss-{os.getpid()}",
       "--log-level=notice", "--lcores=0@(0-1),1@(0-1),2@(0-1)"];
log_level = "notice";
lcores = {{ management = 0; workers = [1, 2]; }};
ports = {{
  lan = {{ device = "net_tap0,iface=wrss0"; }};
  wan = {{ device = "net_tap1,iface=wrss1"; }};
}};
worker = {{ idle_sleep_us = 200; }};
management = {{ port = 0; }};
stats = {{ interval = 0.2; file = "{stats}"; }};
""")
    # Its own network namespace: the tap interfaces appear there, not on the host.
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        p = subprocess.Popen(["ip", "netns", "exec", ns, str(WEIR), "--", "--config", str(cfg)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 20
        while not stats.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
    finally:
        subprocess.run(["ip", "netns", "del", ns])
    assert p.returncode == 0, out[-3000:]
    d = json.loads(stats.read_text())["distribution"]
    print(d)
    assert d["config"] == "rss", d
    for port in ("lan", "wan"):
        x = d[port]
        assert x["hash"] in ("symmetric-toeplitz", "symmetric-key"), x
        assert x["check"] in ("capability", "software", "unverified"), x
        assert x["selftest_split"] == 0, x
        assert f"ports.{port} (net_tap): RSS over 2 queues by {x['hash']}, checked by {x['check']}" in out, out

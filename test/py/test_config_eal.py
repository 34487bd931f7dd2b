"""Issue 42.4 (config half): mistakes that used to pass --check and fail only at start, or
that named no line of the config, are reported as FILE:LINE of the config by --check and by
a reload."""
import json
import os
import subprocess

import pytest

from test_rest import WEIR, Weir, assert_error

pytestmark = [pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}"),
              pytest.mark.skipif(os.geteuid() != 0, reason="weir on net_pcap ports is run as root")]

TOP = """\
log_level = "error";
lcores = { management = 0; workers = [1]; };
ports = {
  lan = { device = "net_null0"; };
  wan = { device = "net_null1"; };
};
mempool = { mbufs = 8191; cache = 128; };
"""


def check(tmp_path, eal, tail=""):
    """--check of a config whose first line is eal = [...] (so the items are on line 1)."""
    cfg = tmp_path / "weir.cfg"
    cfg.write_text(f"eal = [{', '.join(json.dumps(a) for a in eal)}];\n" + TOP + tail)
    p = subprocess.run([str(WEIR), "--", "--config", str(cfg), "--check"], capture_output=True,
                       text=True, timeout=30)
    return cfg, p


BASE = ["--no-huge", "--no-pci", "--file-prefix=weal"]


@pytest.mark.parametrize("eal,needle", [
    (["-m", "-1mbit"], "-m '-1mbit'"),
    (["-m", "128", "-1mbit"], "'-1mbit' is not an EAL option"),
    (["-m", "128", "1mbit"], "'1mbit' is not an EAL option"),
    (["-m", "9223372036854775807L"], "-m '9223372036854775807L'"),
    (["-m", "9223372036854775807"], "-m '9223372036854775807'"),
    (["-m"], "-m needs a value"),
    (["-m128k"], "-m '128k'"),
    (["-m", "128", "-l", "0-x"], "-l '0-x'"),
    (["-m", "128", "-n", "0"], "-n '0'"),
    (["-m", "128", "--proc-type=tertiary"], "--proc-type 'tertiary'"),
    (["-m", "128", "--file-prefix", "a/b"], "--file-prefix 'a/b'"),
    (["-m", "128", "--vdev"], "--vdev needs a value"),
    (["-m", "128", "--no-huge=1"], "--no-huge takes no value"),
    (["-m", "128", "-q"], "'-q' is not an EAL option"),
])
def test_malformed_eal_is_refused_by_check(tmp_path, eal, needle):
    cfg, p = check(tmp_path, BASE + eal)
    assert p.returncode != 0 and p.stderr.startswith(f"{cfg}:1: "), p.stderr
    assert needle in p.stderr, p.stderr


@pytest.mark.parametrize("eal", [
    ["-m", "128"], ["-m128"], ["-m", "128", "-n", "4", "--proc-type=primary"],
    ["-m", "128", "--proc-type", "auto", "-l", "0-1", "--main-lcore=0"],
    ["-m", "128", "--lcores=0@(0-1),1@(0-1)", "--log-level=notice", "--log-level", "eal:8"],
    ["-m", "128", "--vdev", "net_ring0", "-a", "0000:03:00.0,dv_flow_en=1", "--iova-mode=va"],
    ["-m", "128", "--socket-mem=1024,0", "--huge-dir=/dev/hugepages", "--in-memory"],
    ["-m", "128", "--some-future-option", "value", "--another-one"],
])
def test_good_eal_still_passes(tmp_path, eal):
    cfg, p = check(tmp_path, BASE + eal)
    assert p.returncode == 0, p.stderr


def test_missing_policy_script_names_the_config_line(tmp_path):
    tail = "\npolicy = {\n  instructions = 1000000;\n  script = \"nope.lua\";\n};\n"
    cfg, p = check(tmp_path, BASE + ["-m", "128"], tail)
    line = (TOP + tail).splitlines().index('  script = "nope.lua";') + 2
    assert p.returncode != 0 and p.stderr.startswith(f"{cfg}:{line}: "), p.stderr
    assert f"{tmp_path}/nope.lua" in p.stderr, p.stderr


def test_reload_that_needs_a_restart_names_the_line(tmp_path):
    w = Weir(tmp_path, "restart")
    try:
        text = w.cfg.read_text()
        assert '  inbound = "30mbit";\n' in text
        w.cfg.write_text(text.replace('  inbound = "30mbit";\n', ''))
        lines = w.cfg.read_text().splitlines()
        shaping = next(i for i, l in enumerate(lines, 1) if l.startswith("shaping = {"))
        for body in ({"dry_run": True}, {}):
            e = assert_error(*w.request("POST", "/api/v1/policy/reload", body=body), 422)
            assert e["message"].startswith(f"{w.cfg}:{shaping}: shaping the inbound direction"), e
    finally:
        w.stop()

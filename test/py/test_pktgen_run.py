"""pktgen-scripts/run end to end (issue #8): Pktgen-DPDK and weir (or testpmd) on two memif
ports, each forwarding mode for a few seconds of traffic.

Needs root, a Pktgen-DPDK build ($PKTGEN or /opt/pktgen-src/build/app/pktgen; make one with
scripts/build-pktgen, see pktgen-scripts/README.md), weir built ($WEIR_BUILD_DIR, default
build/) and dpdk-testpmd; skips with the reason otherwise. Runs busy-polling DPDK processes:
on a shared machine set WEIR_CPU_LOCK=/tmp/weir-cpu.lock so each run holds that flock.

    /usr/bin/python3 -m pytest test/py/test_pktgen_run.py
"""
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "pktgen-scripts" / "run"
BUILD = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build"))
WEIR = BUILD / "app" / "weir" / "weir"
SECONDS = 2


def _runner_module():
    loader = importlib.machinery.SourceFileLoader("pktgen_run", str(RUN))
    spec = importlib.util.spec_from_loader("pktgen_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _pktgen():
    return _runner_module().find_pktgen(os.environ.get("PKTGEN"))


def test_missing_pktgen_says_how_to_get_one(tmp_path):
    """Without Pktgen the runner exits 77 and says how to build one."""
    p = subprocess.run(["/usr/bin/python3", str(RUN), "--pktgen", str(tmp_path / "none"), "64B"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 77, p.stderr
    for what in ("scripts/build-pktgen", "pktgen-23.03.0", "*.pcap", "--pktgen"):
        assert what in p.stderr, f"{what!r} not in: {p.stderr}"


def test_script_header_args(tmp_path):
    """'-- pktgen-args: -s P:FILE' lines become Pktgen options with FILE under PCAP_DIR."""
    mod = _runner_module()
    (tmp_path / "a.pcap").write_bytes(b"")
    (tmp_path / "b.pcap").write_bytes(b"")
    s = tmp_path / "x.lua"
    s.write_text("-- x.lua: test\n-- pktgen-args: -s 1:a.pcap\n-- pktgen-args: -s 0:b.pcap -P\n"
                 "RATE_PCT = RATE_PCT or 100\n-- pktgen-args: -s 0:ignored.pcap\n")
    assert mod.script_pktgen_args(s, tmp_path) == [
        "-s", f"1:{tmp_path / 'a.pcap'}", "-s", f"0:{tmp_path / 'b.pcap'}", "-P"]
    s.write_text("-- pktgen-args: -s 1:missing.pcap\n")
    with pytest.raises(mod.RunError, match="missing.pcap"):
        mod.script_pktgen_args(s, tmp_path)


MODES = [
    # (forwarder, config, script, flows)
    ("testpmd-io", "conf/pktgen.cfg", "64B", 1),
    ("testpmd-macswap", "conf/pktgen.cfg", "imix", 1),
    ("weir", "conf/pktgen.cfg", "64B", 1),
    ("weir", "conf/pktgen-classify.cfg", "imix", 12),
    ("weir", "conf/pktgen-pfq.cfg", "64B", 1000),
    ("weir", "conf/pktgen-postack.cfg", "imix", 3),
]


@pytest.mark.parametrize("fwd,cfg,script,flows", MODES,
                         ids=[f"{f}-{Path(c).stem}-{s}" for f, c, s, _ in MODES])
def test_run(fwd, cfg, script, flows):
    if os.geteuid() != 0:
        pytest.skip("needs root (DPDK processes, memif sockets under /run)")
    if _pktgen() is None:
        pytest.skip("Pktgen-DPDK not found ($PKTGEN, /opt/pktgen-src/build/app/pktgen): build one "
                    "with scripts/build-pktgen (pktgen-scripts/README.md says how)")
    if fwd == "weir" and not os.access(WEIR, os.X_OK):
        pytest.skip(f"weir not built at {WEIR} (set WEIR_BUILD_DIR)")
    if fwd.startswith("testpmd") and not shutil.which("dpdk-testpmd"):
        pytest.skip("dpdk-testpmd not installed (Debian: dpdk)")
    p = subprocess.run(["/usr/bin/python3", str(RUN), "--fwd", fwd, "--config", str(REPO / cfg),
                        "--weir", str(WEIR), "--time", str(SECONDS), "--flows", str(flows),
                        "--json", script],
                       capture_output=True, text=True,
                       # waiting for WEIR_CPU_LOCK is not the run's fault
                       timeout=3600 if os.environ.get("WEIR_CPU_LOCK") else 240)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    s = res["summary"]
    tx, rx = s["tx_pkts"], s["rx_pkts"]

    # Traffic went through, for about as long as asked (Pktgen's delay stretches when its
    # main thread waits for a busy CPU).
    assert tx > 10000 and rx > 0, s
    assert SECONDS * 0.9 <= s["seconds"] <= SECONDS * 4, s
    assert rx <= tx, s
    assert s["loss_pct"] < 5.0, s       # memif pushes back: a sender waits rather than drops
    # Bytes per frame without FCS. IMIX is 349.8 on paper; Pktgen sends its sequence from
    # a pool whose per-lcore cache reuses some mbufs more than others: ~347-350 here.
    sizes = {"64B": (60, 60), "imix": (340, 360)}[script]
    assert sizes[0] <= s["rx_bytes"] / rx <= sizes[1], s

    if fwd == "weir":
        w = res["weir"]
        lan, wan = w["ports"]["lan"], w["ports"]["wan"]
        # weir saw every frame Pktgen sent, and what it forwarded is what arrived.
        assert lan["rx"] == tx, (lan, s)
        assert lan["forwarded"] == rx, (lan, s)
        assert wan["tx"] == rx, (wan, s)       # a port's tx: frames sent out of it
        # Every lost frame is counted under a reason.
        lost = sum(lan.get(k, 0) for k in ("tx_full", "dropped", "refused"))
        assert tx - rx == lost, (lan, s)
        # Nothing malformed, nothing refused, one flow table entry per flow; nothing came back.
        assert lan["malformed"] == 0 and lan["non_ip"] == 0 and lan["flow_full"] == 0, lan
        assert w["flows"]["inserted"] == flows, w["flows"]
        assert wan["rx"] == 0, wan
        assert w["mbufs"]["in_use"] == 0, w["mbufs"]
        if "classify" in cfg or "pfq" in cfg or "postack" in cfg:
            out = w["shaping"]["outbound"]["classes"]
            # The scripts' UDP to 198.18.0.0/15 matches the last rule: class bulk. A class
            # counts what left it, including frames the WAN ring then refused (tx_full);
            # frames still queued at shutdown are freed and counted as dropped.
            assert out["bulk"]["pkts"] + lan["dropped"] == tx, (out["bulk"], lan)
            assert out["voip"]["pkts"] == 0 and out["web"]["pkts"] == 0, out
    else:
        tp = res["testpmd"]
        assert tp["lan"]["RX-packets"] == tx, (tp, s)
        assert tp["wan"]["TX-packets"] == rx, (tp, s)

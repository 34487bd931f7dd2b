"""A pcap of good and malformed frames replayed through weir (net_pcap ports): weir keeps
running, bridges every frame unchanged and in order, and counts each malformed reason,
fragment and non-IP frame exactly as the generator labelled them.

test_parser_matches_labels needs no root and no EAL: it runs the parser alone
(test/unit/parse_pcap) over the same pcap, so a wrong label is told apart from
a weir bug before the replay runs."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build"))
WEIR = BUILD / "app" / "weir" / "weir"
PARSE_PCAP = BUILD / "test" / "unit" / "parse_pcap"
GEN = REPO / "test" / "pcap" / "gen_malformed.py"

sys.path.insert(0, str(REPO / "scripts"))
from weirtb import weir_config_text  # noqa: E402


def read_frames(path):
    """Frame bytes of a pcap (classic libpcap format), timestamps ignored."""
    from scapy.utils import RawPcapReader
    return [bytes(data) for data, _meta in RawPcapReader(str(path))]


def generate(tmp_path):
    inp, expect_file = tmp_path / "in.pcap", tmp_path / "expect.json"
    subprocess.run([sys.executable, str(GEN), str(inp), str(expect_file)], check=True,
                   capture_output=True)
    return inp, json.loads(expect_file.read_text())


@pytest.mark.skipif(not PARSE_PCAP.exists(), reason=f"parse_pcap not built at {PARSE_PCAP}")
def test_parser_matches_labels(tmp_path):
    inp, expect = generate(tmp_path)
    got = json.loads(subprocess.run([str(PARSE_PCAP), str(inp)], check=True, capture_output=True,
                                    text=True).stdout)
    assert got == expect
    assert all(n > 0 for n in expect["malformed"].values()), "a reason the pcap never triggers"
    assert expect["fragments"] > 0 and expect["non_ip"] > 0 and expect["managed"] > 0
    assert expect["l2_control"] > 0


@pytest.mark.skipif(os.geteuid() != 0, reason="weir on net_pcap ports is run as root")
@pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}")
def test_malformed_pcap_replay(tmp_path):
    from scapy.utils import wrpcap
    inp, expect = generate(tmp_path)
    empty = tmp_path / "empty.pcap"
    wrpcap(str(empty), [], linktype=1)
    out, lan_out, stats = tmp_path / "out.pcap", tmp_path / "lan_out.pcap", tmp_path / "stats.json"
    cfg = tmp_path / "weir.cfg"
    cfg.write_text(weir_config_text(f"net_pcap0,rx_pcap={inp},tx_pcap={lan_out}",
                                    f"net_pcap1,rx_pcap={empty},tx_pcap={out}",
                                    prefix=f"wpcap-{os.getpid()}",
                                    body="stats = { interval = 0.2; };\n"))

    p = subprocess.Popen([str(WEIR), "--", "--config", str(cfg), "--stats-file", str(stats)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        data, deadline = None, time.time() + 30
        while time.time() < deadline and p.poll() is None:
            if stats.exists():
                data = json.loads(stats.read_text())
                if data["ports"]["lan"]["rx"] >= expect["total"]:
                    break
            time.sleep(0.1)
        assert p.poll() is None, "weir exited while replaying the pcap"
        assert data is not None and data["ports"]["lan"]["rx"] == expect["total"], data
    finally:
        p.send_signal(signal.SIGTERM)
        stdout, stderr = p.communicate(timeout=30)
    assert p.returncode == 0, stderr
    assert "mbufs in use after shutdown: 0 of" in stdout, stdout

    final = json.loads(stats.read_text())
    lan = final["ports"]["lan"]
    # Every reason is in both (zeros included), so a missing counter fails too.
    assert lan["malformed_by"] == expect["malformed"]
    assert lan["malformed"] == sum(expect["malformed"].values())
    assert lan["fragments"] == expect["fragments"]
    assert lan["non_ip"] == expect["non_ip"]
    assert lan["l2_control"] == expect["l2_control"]
    assert lan["managed"] == expect["managed"]
    # ESP/AH/NAT-T frames are managed flows, one per SA (SPIs 0x1001..0x5005).
    assert lan["ipsec"]["pkts"] == expect["ipsec"]
    assert final["ipsec"]["sas_active"] == 5, final["ipsec"]
    assert lan["forwarded"] == expect["total"] and lan["tx_full"] == 0
    assert final["ports"]["wan"]["tx"] == expect["total"]
    assert final["ports"]["wan"]["rx"] == 0

    # The bridge is transparent: the WAN side sent exactly the frames read, in order.
    assert read_frames(out) == read_frames(inp)
    assert read_frames(lan_out) == []

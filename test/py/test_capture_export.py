"""Capture and flow export on a running weir in the testbed (docs/capture.md,
docs/ipfix.md): a capture of one connection, read back by tshark, holds as many
frames as weir counted for the flow, each with weir's verdict as its comment; the
IPFIX records nfdump's collector (nfcapd) received for two transfers carry the
bytes and packets weir counted each way; bad capture requests get 4xx with a
reason. One weir serves the three tests.
"""
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "test" / "py"))

from conftest import weir_testbed  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from test_classes import write_config  # noqa: E402

PY = "/usr/bin/python3"
WEIRCTL = str(REPO / "scripts" / "weirctl")
API_PORT = 18080
IPFIX_PORT = 4739


def ctl(tb, *args, check=True):
    """weirctl in weir's namespace (its API listens on 127.0.0.1 there)."""
    p = tb.run("gw", [PY, WEIRCTL, "--url", f"http://127.0.0.1:{API_PORT}", *args],
               check=False)
    if check:
        assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


def api(tb, method, path, body=None):
    """(status, JSON) of one request (curl: quicker to start than Python on a busy box)."""
    cmd = ["curl", "-s", "-w", "\n%{http_code}", "-X", method]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
    p = tb.run("gw", cmd + [f"http://127.0.0.1:{API_PORT}{path}"])
    text, status = p.stdout.rsplit("\n", 1)
    return int(status), json.loads(text)


def flow_of(tb, port):
    """The TCP flow to WAN port `port` as weir counts it (GET /api/v1/flows)."""
    flows = api(tb, "GET", f"/api/v1/flows?proto=tcp&port={port}")[1]["flows"]
    flows = [f for f in flows if f["wan"]["port"] == port]
    assert len(flows) == 1, flows
    return flows[0]


@pytest.fixture(scope="module")
def cap_tb(tmp_path_factory):
    if not shutil.which("tshark") or not shutil.which("nfcapd"):
        pytest.skip("needs tshark and nfdump (scripts/install-deps)")
    d = tmp_path_factory.mktemp("capexp")
    (d / "flows").mkdir()
    cfg = write_config(d / "capexp.cfg", body_file="testbed-shaped.cfg")
    # Ended flows leave the table (and are exported) 3 s after their FINs.
    text = cfg.read_text().replace("tcp_closing = 30;", "tcp_closing = 3;").replace(
        "tcp_closed = 5;", "tcp_closed = 3;")
    cfg.write_text(text + f"""
management = {{ port = {API_PORT}; }};
capture = {{ dir = "{d}/captures"; keep = 4; }};
export = {{ ipfix = {{ collector = "127.0.0.1:{IPFIX_PORT}"; template_interval = 1;
                      active_timeout = 1; }}; }};
""")
    with weir_testbed(cfg, lan=2, wan=2, paths=[PathSpec(delay=5), PathSpec(delay=5)]) as tb:
        # The collector runs beside weir; weir resends its templates every second,
        # so records sent from now on can be decoded.
        nf = tb.popen("gw", ["nfcapd", "-b", "127.0.0.1", "-p", str(IPFIX_PORT), "-w",
                             str(d / "flows"), "-t", "3600"])
        time.sleep(1.5)
        try:
            # Sends before the collector listened failed (ICMP port unreachable):
            # counted, nothing else.
            yield tb, d, nf, tb.weir_stats()["ipfix"]["send_errors"]
        finally:
            if nf.poll() is None:
                nf.kill()
                nf.communicate()


def test_capture_read_back_by_tshark(cap_tb):
    tb, d, _, _ = cap_tb
    l1, w1 = tb.addr("l1"), tb.addr("w1")
    r = json.loads(ctl(tb, "--json", "capture", "start", "--host", l1, "--peer", w1,
                       "--proto", "tcp", "--peer-port", "5310", "--max-packets", "100000",
                       "--snaplen", "128").stdout)
    cid = str(r["id"])
    assert r["state"] == "running"
    res = tb.bulk("l1", "w1", nbytes=1_500_000, port=5310)
    assert res.bytes_received == 1_500_000
    time.sleep(0.3)                 # the last ACKs are through
    f = flow_of(tb, 5310)
    weir_pkts = f["out"]["pkts"] + f["in"]["pkts"]
    st = json.loads(ctl(tb, "--json", "capture", "stop", cid).stdout)
    assert st["state"] == "ended" and st["end_reason"] == "stopped"
    out = d / "c.pcapng"
    ctl(tb, "capture", "get", cid, "-o", str(out))
    rows = subprocess.run(["tshark", "-r", str(out), "-T", "fields", "-e", "frame.comment",
                           "-e", "frame.len", "-e", "frame.cap_len"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    comments = [x.split("\t")[0] for x in rows]
    verdicts = {}
    for c in comments:
        v = c.split(";")[0].removeprefix("weir: ")
        verdicts[v] = verdicts.get(v, 0) + 1
    print(f"flow {weir_pkts} packets; capture {st['packets']} written, {st['lost']} lost; "
          f"verdicts {verdicts}")
    # Every frame weir counted for the flow is in the file (or counted lost).
    assert len(rows) == st["packets"]
    assert st["packets"] + st["lost"] == weir_pkts and st["lost"] == 0
    # Each carries weir's verdict and class; frames longer than the snap length
    # keep their length on the wire.
    assert all(c.startswith("weir: ") and "class default (" in c for c in comments), comments[:3]
    assert set(verdicts) <= {"forwarded", "queued", "ack-held", "kept-by-mode",
                             "dropped:queue", "dropped:admission"}, verdicts
    assert verdicts.get("queued", 0) > 0
    assert any(int(x.split("\t")[1]) > 128 and int(x.split("\t")[2]) == 128 for x in rows)
    assert sum(st["verdicts"].values()) == st["packets"]


def test_capture_bad_input(cap_tb):
    tb, _, _, _ = cap_tb
    for body, code, words in [
        ({"filter": {"host": "10.0.0.300"}}, 422, "not an IPv4"),
        ({"filter": {"bpf": "tcp port and"}}, 422, "bpf"),
        ({"filter": {"class": "nosuch"}}, 422, "no leaf class"),
        ({"filter": {"colour": "red"}}, 400, "unknown filter key"),
        ({"max_bytes": 1 << 40}, 422, "at most"),
        ({"snaplen": 10}, 422, "at least"),
        ({"max_seconds": "long"}, 400, "positive integer"),
        ({"limit": 3}, 400, "unknown field"),
        ({"filter": {"port": "80"}}, 400, "must be an integer"),
    ]:
        status, j = api(tb, "POST", "/api/v1/captures", body)
        assert status == code and words in j["error"]["message"], (body, status, j)
    assert api(tb, "GET", "/api/v1/captures/999")[0] == 404
    ids = [api(tb, "POST", "/api/v1/captures", {"filter": {"port": 9}, "max_seconds": 30})[1]["id"]
           for _ in range(4)]
    status, j = api(tb, "POST", "/api/v1/captures", {})
    assert status == 409 and "most weir runs at once" in j["error"]["message"], j
    assert api(tb, "GET", f"/api/v1/captures/{ids[0]}/pcapng")[0] == 409
    for i in ids:
        status, j = api(tb, "DELETE", f"/api/v1/captures/{i}")
        assert status == 200 and j["state"] == "deleted"
    assert api(tb, "GET", f"/api/v1/captures/{ids[0]}")[0] == 404
    # An abandoned capture ends at its limit, and its file goes capture.keep (4 s) later.
    status, j = api(tb, "POST", "/api/v1/captures", {"max_seconds": 1})
    assert status == 201 and Path(j["file"]).exists()
    time.sleep(1.3)
    j = api(tb, "GET", f"/api/v1/captures/{j['id']}")[1]
    assert j["state"] == "ended" and j["end_reason"] == "time limit" and j["removed_in_s"] <= 4
    time.sleep(j["removed_in_s"] + 0.3)
    assert api(tb, "GET", f"/api/v1/captures/{j['id']}")[0] == 404
    assert not Path(j["file"]).exists()


def test_ipfix_matches_weir_counters(cap_tb):
    tb, d, nf, errors_before = cap_tb
    want = {}
    # The first lasts over a second: reported by the active timeout (1 s), then at its end.
    for src, dst, port, n in (("l1", "w1", 5320, 8_000_000), ("l2", "w2", 5321, 300_000)):
        assert tb.bulk(src, dst, nbytes=n, port=port).bytes_received == n
        time.sleep(0.3)             # the last ACKs are through
        want[port] = flow_of(tb, port)
    # The flows expire (tcp_closed = 3 s), weir sends their records.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = tb.weir_stats()
        if st["ipfix"]["records"] >= 2 and not api(
                tb, "GET", "/api/v1/flows?port=5321")[1]["flows"]:
            break
        time.sleep(0.3)
    time.sleep(0.5)
    nf.send_signal(signal.SIGTERM)  # nfcapd writes its file out
    nf.communicate(timeout=10)
    files = sorted((d / "flows").glob("nfcapd.*"))
    assert files, list((d / "flows").iterdir())
    rows = subprocess.run(["nfdump", "-q", "-o", "csv", "-R", str(d / "flows")],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    print(f"ipfix {tb.weir_stats()['ipfix']}\n" + "\n".join(rows))
    got = {}
    for row in rows:
        c = row.split(",")
        if len(c) > 14 and c[7] == "TCP" and int(c[6]) in want:
            got.setdefault(int(c[6]), []).append(c)
    for port, f in want.items():
        recs = got.get(port)
        assert recs, port
        # A flow's records are deltas: their sum is the flow. ipkt/ibyt: the
        # initiator's (LAN) direction; opkt/obyt: the reverse (RFC 5103).
        tot = [sum(int(c[i]) for c in recs) for i in (11, 12, 13, 14)]
        assert tot == [f["out"]["pkts"], f["out"]["bytes"], f["in"]["pkts"], f["in"]["bytes"]], \
            (recs, f)
        assert all(c[3] == f["lan"]["addr"] and c[4] == f["wan"]["addr"] for c in recs)
    assert len(got[5320]) >= 2, got[5320]     # an active-timeout record and the end's
    # flowEndReason (IE 136): a flow that closed (FIN seen) ends with "end of flow
    # detected" (3); its earlier records are active-timeout reports (2).
    raw = subprocess.run(["nfdump", "-q", "-o", "raw", "-R", str(d / "flows")],
                         capture_output=True, text=True, check=True).stdout
    reasons = [re.search(r"end reason\s*=\s*(0x[0-9a-f]+)", r).group(1)
               for r in raw.split("Flow Record:")
               if re.search(r"dst port\s*=\s*5320\b", r) and "end reason" in r]
    assert reasons and reasons[-1] == "0x03" and set(reasons[:-1]) <= {"0x02"}, reasons
    # The collector was down at weir's start: counted, and nothing failed since.
    assert tb.weir_stats()["ipfix"]["send_errors"] == errors_before

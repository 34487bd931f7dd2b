"""scripts/ipabr_experiments.py (seed 000's chapter 7 in the testbed) still runs end to end:
its --quick form writes its CSVs, plots and table, and ipabr's row shows what the mode is
for (the senders' round trip near the path's at default queue limits, fair shares, delivery
latency far below HTB's). Its total counts every flow,
finished or not (a client killed before it reports is read from its server), and
paper_experiments.Sampler keeps its rows when weir restarts under it."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))


def quick(tmp_path, case, *extra):
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    out = tmp_path / "ipabr"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "ipabr_experiments.py"),
                        case, "--quick", "--out", str(out), *extra],
                       capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return out


def test_ipabr_experiments_quick(tmp_path):
    """Seed 000's claim in short form, at weir's and the emulator's default queue limits
    (the case a user meets): IP-ABR holds each flow to its share's pipe, so the senders'
    round trip stays within 2x the path's (100 ms here; before the max-min fix a window-
    limited flow counted light and every window grew to the class: seconds of queue at
    weir, 9.7 s on the satellite path), no flow is starved or runs away (Jain >= 0.9),
    and segments wait less than behind HTB's pfifo. The results name their commit."""
    out = quick(tmp_path, "droptail")
    rows = {row["mode"]: row for row in csv.DictReader(open(out / "droptail.csv"))}
    assert set(rows) == {"ipabr", "htb"}, rows
    for name in ("droptail.png", "droptail_series.csv", "droptail_esdl.csv", "README-table.md"):
        assert (out / name).exists(), name
    ia, htb = rows["ipabr"], rows["htb"]
    assert int(ia["segments"]) > 500 and int(ia["iperf_errors"]) == 0, ia
    assert float(ia["sender_rtt_ms"]) < 200, ia
    assert float(ia["jain"]) >= 0.9, ia
    assert float(ia["esdl_mean_ms"]) < float(htb["esdl_mean_ms"]), (ia, htb)
    assert ia["commit"] and ia["commit"] != "unknown", ia
    table = (out / "README-table.md").read_text()
    assert "| ipabr |" in table and "Medians over runs" in table and ia["commit"] in table


def test_total_counts_a_flow_whose_client_never_reported(tmp_path):
    """Flow 0's iperf3 client is killed a second before its end: it never reports, but
    its receiver got its bytes. The total must still be what the class carried (less
    headers: 1448/1538 of the wire), not three flows' worth: summing only the clients
    that reported gave about 3/4 of it."""
    out = quick(tmp_path, "droptail", "--modes", "ipabr", "--kill-flow-at", "11", "--queues", "30")
    (ia,) = list(csv.DictReader(open(out / "droptail.csv")))
    assert int(ia["unfinished"]) >= 1, ia
    total, cls = float(ia["total_kbps"]), float(ia["class_kbps"])
    assert cls > 1000, ia
    assert 0.85 * cls <= total <= 1.01 * cls, ia


def test_sws_quick(tmp_path):
    """The silly-window sweep's --quick form: one MSS, two round trips, the credit on
    and off; its CSVs, plot and table."""
    out = quick(tmp_path, "sws")
    rows = list(csv.DictReader(open(out / "sws.csv")))
    assert {(r["credit"], r["rtt_ms"]) for r in rows} == {
        (c, t) for c in ("on", "off") for t in ("100.0", "150.0", "all")}, rows
    for r in rows:
        if r["rtt_ms"] == "all":
            assert int(r["unfinished"]) == 0, r
            assert 0.5 < float(r["util_share"]) < 1.1, r
    for name in ("sws_flows.csv", "sws.png"):
        assert (out / name).exists(), name
    assert "Silly-window credit" in (out / "README-table.md").read_text()


def test_sampler_keeps_rows_across_a_restart():
    """weir restarted under the Sampler (uptime and counters from zero again): the rows
    before stay, bytes and drops carry on from where they were, and the class rate and
    queue figures cover the whole span (they read 0 / nothing after a restart)."""
    import paper_experiments as pe
    snaps = iter([(10.0, 3, 1000, 0, 1), (10.5, 4, 2000, 0, 1), (11.0, 5, 3000, 0, 2),
                  (0.3, 6, 500, 0, 0), (0.8, 7, 1500, 0, 1)])
    s = pe.Sampler(None, counters=lambda tb: next(snaps))
    for _ in range(5):
        s.sample()
    assert len(s.rows) == 5 and s.restarts == 1
    assert [r[2] for r in s.rows] == [1000, 2000, 3000, 3500, 4500]
    assert [r[4] for r in s.rows] == [1, 1, 2, 2, 3]
    assert all(b[0] >= a[0] for a, b in zip(s.rows, s.rows[1:]))
    assert s.class_rate() > 0
    qmean, qmax, _ = s.buffer(skip=0)
    assert qmax == 7 and qmean == 5

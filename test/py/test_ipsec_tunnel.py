"""An IPsec ESP tunnel through weir (docs/ipsec.md). This kernel has no ESP transform, so
the tunnel is user space (test/esptun: TUN devices, AES-128-CBC + HMAC-SHA-256-128 ESP over
raw sockets), carrying real Linux TCP between its inner addresses. Weir shapes both
directions in postack leaves; an SA must be shaped pfq instead and never modified: the
tunnel checks every packet's ICV, and the bulk transfer's sha256 is checked end to end.
Weir's per-SA loss figures must equal the losses injected before it: every 50th ESP packet
the LAN end sends is never sent (its sequence number consumed), and the WAN path drops 1 %
of what it carries towards weir."""
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from conftest import weir_testbed  # noqa: E402
from weirtb import PathSpec  # noqa: E402
from weirtb.esp import SPI, EspTunnel, esptun_binary, sa_name, wait_stats_settle  # noqa: E402

RATE_MBIT = 10
DROP_EVERY = 50


@pytest.fixture(scope="module")
def tunnel_tb(tmp_path_factory):
    if not esptun_binary().exists():
        pytest.skip(f"{esptun_binary()} not built (needs libcrypto: libssl-dev)")
    cfg = tmp_path_factory.mktemp("ipsec") / "weir.cfg"
    cfg.write_text(weirtb.testbed_config_text(
        f'shaping = {{ outbound = "{RATE_MBIT}mbit"; inbound = "{RATE_MBIT}mbit"; }};\n'))
    path = PathSpec(delay=10, loss=1, loss_dir="to_weir")
    with weir_testbed(cfg, lan=1, wan=1, paths=[path], seed=7) as tb:
        yield tb


def test_esp_tunnel_intact_and_sa_loss(tunnel_tb):
    tb = tunnel_tb
    emu0 = tb.wanemu_stats()
    with EspTunnel(tb, "l1", "w1", drop_every=(DROP_EVERY, 0)) as t:
        up = tb.bulk("l1", "w1", addr=t.inner["w1"], nbytes=3_000_000, timeout=60)
        down = tb.bulk("w1", "l1", addr=t.inner["l1"], nbytes=1_500_000, port=5301, timeout=60)
        time.sleep(0.5)
    st = t.stats
    assert up.ok and down.ok, (up, down)
    # Integrity: no packet failed its ICV or anti-replay at either end.
    for h in ("l1", "w1"):
        assert st[h]["auth_fail"] == 0 and st[h]["bad"] == 0 and st[h]["replay"] == 0, st
        assert st[h]["rx_ok"] > 100, st
    # Under shaping: the uploads took at least what 10 Mbit/s allows.
    assert up.mbit_s <= RATE_MBIT * 1.05, up.mbit_s

    def sas(s):
        return {k: v["pkts"] for k, v in s["ipsec"]["sa"].items()}
    stats = wait_stats_settle(tb, sas)
    out_sa = stats["ipsec"]["sa"][sa_name(tb, "l1", "w1", SPI[0])]
    in_sa = stats["ipsec"]["sa"][sa_name(tb, "w1", "l1", SPI[1])]
    emu = tb.wanemu_stats()
    path = next(iter(emu["paths"].values()))
    path0 = next(iter(emu0["paths"].values()))
    injected_wan = path["to_weir"]["dropped_random"] - path0["to_weir"]["dropped_random"]
    print(f"l1 tunnel {st['l1']}\nw1 tunnel {st['w1']}\nweir SA out {out_sa}\nweir SA in {in_sa}\n"
          f"wanemu dropped towards weir: {injected_wan}; ports {stats['ports']['lan']['ipsec']} "
          f"{stats['ports']['wan']['ipsec']}; up {up.mbit_s:.2f} Mbit/s")

    # Every ESP frame the LAN end sent reached weir; the sequence numbers it
    # consumed without sending are weir's loss (a drop at the very end, with
    # no later packet to show the gap, is not yet visible).
    assert out_sa["pkts"] == st["l1"]["tx"], (out_sa, st["l1"])
    assert st["l1"]["dropped"] - 1 <= out_sa["lost"] <= st["l1"]["dropped"], (out_sa, st["l1"])
    assert st["l1"]["dropped"] >= 20
    assert out_sa["late"] == 0 and out_sa["resync"] == 0 and out_sa["proto"] == "esp"
    # The WAN path's losses towards weir (ESP all but the odd ARP frame).
    assert injected_wan >= 5
    assert injected_wan - 3 <= in_sa["lost"] <= injected_wan, (in_sa, injected_wan)
    assert in_sa["pkts"] + in_sa["lost"] <= st["w1"]["tx"] + 1
    tun = stats["ipsec"]["tunnels"]
    assert len(tun) == 1 and next(iter(tun.values()))["sas"] == 2, tun
    # Shaped pfq instead of their postack leaves, both ways, and never a
    # window clamp or a held ACK (nothing of them is readable as TCP).
    for port in ("lan", "wan"):
        p = stats["ports"][port]
        assert p["ipsec"]["plain"] == p["ipsec"]["pkts"] > 0, p["ipsec"]
        assert p["win_clamped"] == 0
    assert stats["shaping"]["outbound"]["pkts"] >= out_sa["pkts"]

#!/usr/bin/python3
"""IPsec through weir (issue 22, docs/ipsec.md), in the namespace testbed with the user-space
ESP tunnel (test/esptun: AES-128-CBC + HMAC-SHA-256-128; this kernel has no ESP transform).

Three measurements:
  loss     weir's per-SA loss figures against losses injected before weir: the WAN path
           drops a given share of what it carries towards weir (wanemu loss=, loss_dir=
           to_weir), and the LAN tunnel end consumes every Nth sequence number without
           sending. One sha256-checked bulk transfer each way per setting, weir shaping
           10 Mbit/s in postack leaves (the SAs are shaped pfq).
  corrupt  the thesis' SPEP scenario as far as the testbed goes (Secs. 5.1-5.2): the WAN
           host is the mobile one, behind a 200 ms path whose last hop corrupts one bit per
           32 KB or 16 KB (wanemu corrupt=, after weir), and the LAN tunnel end also skips
           every Nth sequence number (loss before weir). The mobile end's ICV failures are
           the corruption losses; weir's per-SA `lost` must count only the loss before it.
  goodput  a tunnelled bulk transfer (LAN -> WAN) through weir (no shaping) and through a
           Linux bridge in its place, rounds alternating; the tunnel's user-space crypto is
           the bottleneck for both, so this prices weir against a bridge on the same path,
           not weir's own speed.

Usage (as root):
  scripts/ipsec_experiments.py --out docs/results/ipsec                 # ~3 min
  scripts/ipsec_experiments.py --quick --out /tmp/ipsec                 # < 60 s
Writes OUT/loss.csv, OUT/goodput.csv, OUT/ipsec.md and OUT/ipsec.png.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import weirtb  # noqa: E402
from weirtb.esp import SPI, EspTunnel, sa_name, wait_stats_settle  # noqa: E402
from weirtb.experiment import write_csv  # noqa: E402


def config(path, shaped):
    body = 'shaping = { outbound = "10mbit"; inbound = "10mbit"; };\n' if shaped else ""
    path.write_text(weirtb.testbed_config_text(body))
    return path


def loss_run(loss_pct, drop_every, nbytes, cfg_dir):
    os.environ["WEIR_TESTBED_CFG"] = str(config(cfg_dir / "shaped.cfg", True))
    tb = weirtb.Testbed(lan=1, wan=1, seed=11,
                        paths=[weirtb.PathSpec(delay=10, loss=loss_pct, loss_dir="to_weir")])
    try:
        tb.claim().up()
        emu0 = next(iter(tb.wanemu_stats()["paths"].values()))["to_weir"]
        with EspTunnel(tb, "l1", "w1", drop_every=(drop_every, 0)) as t:
            up = tb.bulk("l1", "w1", addr=t.inner["w1"], nbytes=nbytes, timeout=120)
            down = tb.bulk("w1", "l1", addr=t.inner["l1"], nbytes=nbytes // 2, port=5301,
                           timeout=120)
            time.sleep(0.5)
        st = wait_stats_settle(tb, lambda s: {k: v["pkts"] for k, v in s["ipsec"]["sa"].items()})
        emu = next(iter(tb.wanemu_stats()["paths"].values()))["to_weir"]
        out_sa = st["ipsec"]["sa"][sa_name(tb, "l1", "w1", SPI[0])]
        in_sa = st["ipsec"]["sa"][sa_name(tb, "w1", "l1", SPI[1])]
        return {
            "wan_loss_pct": loss_pct, "tunnel_drop_every": drop_every,
            "intact": up.ok and down.ok and t.stats["l1"]["auth_fail"] == 0
            and t.stats["w1"]["auth_fail"] == 0,
            "up_mbit_s": round(up.mbit_s, 2),
            "out_sa_sent": t.stats["l1"]["tx"], "out_injected": t.stats["l1"]["dropped"],
            "out_weir_pkts": out_sa["pkts"], "out_weir_lost": out_sa["lost"],
            "out_weir_late": out_sa["late"],
            "in_sa_sent": t.stats["w1"]["tx"],
            "in_injected": emu["dropped_random"] - emu0["dropped_random"],
            "in_weir_pkts": in_sa["pkts"], "in_weir_lost": in_sa["lost"],
            "in_weir_late": in_sa["late"],
        }
    finally:
        tb.down()


def corrupt_runs(corrupts, runs, drop_every, nbytes, cfg_dir):
    os.environ["WEIR_TESTBED_CFG"] = str(config(cfg_dir / "shaped.cfg", True))
    rows = []
    for c in corrupts:
        tb = weirtb.Testbed(lan=1, wan=1, seed=13, paths=[weirtb.PathSpec(
            delay=200, corrupt=c, loss_dir="to_path")])
        try:
            tb.claim().up()
            for r in range(runs):
                emu0 = next(iter(tb.wanemu_stats()["paths"].values()))["to_path"]
                with EspTunnel(tb, "l1", "w1", drop_every=(drop_every, 0)) as t:
                    res = tb.bulk("l1", "w1", addr=t.inner["w1"], nbytes=nbytes, timeout=180)
                    time.sleep(0.5)
                st = wait_stats_settle(tb, lambda s: {k: v["pkts"] for k, v in s["ipsec"]["sa"].items()})
                emu = next(iter(tb.wanemu_stats()["paths"].values()))["to_path"]
                sa = st["ipsec"]["sa"][sa_name(tb, "l1", "w1", SPI[0])]
                rows.append({
                    "bytes_per_error": c, "run": r + 1, "ok": res.ok, "mbit_s": round(res.mbit_s, 2),
                    "esp_sent": t.stats["l1"]["tx"], "upstream_injected": t.stats["l1"]["dropped"],
                    "weir_pkts": sa["pkts"], "weir_lost": sa["lost"],
                    "corrupted_after_weir": emu["corrupted"] - emu0["corrupted"],
                    "icv_failures_at_mobile": t.stats["w1"]["auth_fail"],
                })
                print(rows[-1], flush=True)
                # The next run's SA is the same SPI: let weir's entry go, so it starts afresh.
                time.sleep(0.1)
                tb.start_gateway("weir")
        finally:
            tb.down()
    return rows


def goodput_runs(rounds, nbytes, cfg_dir):
    os.environ["WEIR_TESTBED_CFG"] = str(config(cfg_dir / "plain.cfg", False))
    tb = weirtb.Testbed(lan=1, wan=1, emu="bridge", paths=[weirtb.PathSpec()])
    rows = []
    try:
        tb.claim().up()
        with EspTunnel(tb, "l1", "w1") as t:
            for r in range(rounds):
                order = ("weir", "linux-bridge") if r % 2 == 0 else ("linux-bridge", "weir")
                for gw in order:
                    tb.start_gateway(gw)
                    res = tb.bulk("l1", "w1", addr=t.inner["w1"], nbytes=nbytes, timeout=120)
                    rows.append({"round": r + 1, "gateway": gw, "ok": res.ok,
                                 "mbit_s": round(res.mbit_s, 1)})
                    print(rows[-1], flush=True)
        for h in ("l1", "w1"):
            if t.stats[h]["auth_fail"]:
                raise RuntimeError(f"ICV failures at {h}: {t.stats[h]}")
    finally:
        tb.down()
    return rows


def plot(loss, good, png):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no PNG")
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    inj = [r["in_injected"] for r in loss] + [r["out_injected"] for r in loss]
    got = [r["in_weir_lost"] for r in loss] + [r["out_weir_lost"] for r in loss]
    a.scatter([r["in_injected"] for r in loss], [r["in_weir_lost"] for r in loss],
              label="WAN -> LAN SA (wanemu loss towards weir)")
    a.scatter([r["out_injected"] for r in loss], [r["out_weir_lost"] for r in loss], marker="x",
              label="LAN -> WAN SA (tunnel skips every Nth)")
    top = max(inj + got + [1])
    a.plot([0, top], [0, top], "k:", lw=1, label="equal")
    a.set_xlabel("packets lost before weir (injected)")
    a.set_ylabel("weir's per-SA lost")
    a.legend(fontsize=8)
    a.set_title("loss localisation from ESP sequence numbers")
    gws = ["weir", "linux-bridge"]
    b.bar(gws, [statistics.median([r["mbit_s"] for r in good if r["gateway"] == g]) for g in gws])
    b.set_ylabel("tunnelled bulk goodput, Mbit/s (median)")
    b.set_title("ESP tunnel through weir vs a Linux bridge")
    fig.tight_layout()
    fig.savefig(png, dpi=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--losses", default="0,0.5,1,2")
    ap.add_argument("--drop-every", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bytes", type=int, default=4_000_000)
    ap.add_argument("--corrupt", default="32768,16384", help="bytes per bit error ('' = none)")
    ap.add_argument("--corrupt-runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="one loss setting, no corruption runs, one goodput round, 1 MB")
    args = ap.parse_args()
    if args.quick:
        args.losses, args.rounds, args.bytes, args.corrupt = "1", 1, 1_000_000, ""
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as cfgs:
        loss = []
        for lp in [float(x) for x in args.losses.split(",")]:
            loss.append(loss_run(lp, args.drop_every, args.bytes, Path(cfgs)))
            print(loss[-1], flush=True)
        corrupt = corrupt_runs([int(c) for c in args.corrupt.split(",") if c], args.corrupt_runs,
                               args.drop_every * 2, args.bytes // 2, Path(cfgs))
        good = goodput_runs(args.rounds, args.bytes * 2, Path(cfgs))
    write_csv(out / "loss.csv", loss)
    if corrupt:
        write_csv(out / "corrupt.csv", corrupt)
    write_csv(out / "goodput.csv", good)
    med = {g: statistics.median([r["mbit_s"] for r in good if r["gateway"] == g])
           for g in ("weir", "linux-bridge")}
    md = ["# IPsec ESP through weir", "",
          f"`scripts/ipsec_experiments.py {' '.join(sys.argv[1:])}`", "",
          "## Per-SA loss against losses injected before weir", "",
          "| WAN loss towards weir | tunnel skips every | intact | LAN->WAN SA: injected / weir lost / late "
          "| WAN->LAN SA: injected / weir lost / late | upload Mbit/s |",
          "|---|---|---|---|---|---|"]
    for r in loss:
        md.append(f"| {r['wan_loss_pct']} % | {r['tunnel_drop_every']} | {r['intact']} | "
                  f"{r['out_injected']} / {r['out_weir_lost']} / {r['out_weir_late']} | "
                  f"{r['in_injected']} / {r['in_weir_lost']} / {r['in_weir_late']} | {r['up_mbit_s']} |")
    if corrupt:
        md += ["", "## A corrupting last hop after weir (SPEP scenario, Secs. 5.1-5.2)", "",
               "| bytes per bit error | run | intact | Mbit/s | skipped before weir | weir lost | "
               "corrupted after weir | ICV failures at the mobile end |",
               "|---|---|---|---|---|---|---|---|"]
        for r in corrupt:
            md.append(f"| {r['bytes_per_error']} | {r['run']} | {r['ok']} | {r['mbit_s']} | "
                      f"{r['upstream_injected']} | {r['weir_lost']} | {r['corrupted_after_weir']} | "
                      f"{r['icv_failures_at_mobile']} |")
    md += ["", "## Tunnelled goodput, weir against a Linux bridge", "",
           "| gateway | runs, Mbit/s | median |", "|---|---|---|"]
    for g in ("weir", "linux-bridge"):
        md.append(f"| {g} | {', '.join(str(r['mbit_s']) for r in good if r['gateway'] == g)} | "
                  f"{med[g]} |")
    md.append(f"\nweir / Linux bridge: {med['weir'] / med['linux-bridge']:.2f}\n")
    (out / "ipsec.md").write_text("\n".join(md) + "\n")
    plot(loss, good, out / "ipsec.png")
    print("\n".join(md))


if __name__ == "__main__":
    main()

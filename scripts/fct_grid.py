#!/usr/bin/env python3
"""Collect `scripts/fct.py bulk` runs (one OUT directory per RTT, rate and flow count, as
docs/results/fct/grid/r<RTT>-<RATE>-f<FLOWS>/) into one table and one figure.

Usage: scripts/fct_grid.py DIR      # writes DIR/grid.csv, DIR/grid.md and, with matplotlib, DIR/grid.png

Cells below 0.95 of the payload a class carries are in bold for the weir modes (HTB does
not charge Ethernet's 24 bytes of overhead, so it can read above 1).
"""
import csv
import sys
from pathlib import Path

ORDER = ("pfq", "postack", "postack-paced", "tcr", "ipabr", "htb")
DIRS = ("upload", "download")


def load(d):
    rows = []
    for f in sorted(Path(d).glob("r*/bulk.csv")):
        rows += list(csv.DictReader(f.open()))
    return rows


def key(r):
    return (float(r["rate"].lower().replace("mbit", "")), float(r["rtt_ms"]), int(r["flows"]), r["cc"])


def main():
    d = Path(sys.argv[1])
    rows = load(d)
    present = {r["mode"] for r in rows}
    # the modes the runs measured, weir's in their usual order, HTB last
    MODES = [m for m in ORDER if m in present] + sorted(present - set(ORDER))
    cells = sorted({key(r) for r in rows})
    table = {}
    for r in rows:
        table[key(r) + (r["mode"], r["direction"])] = float(r["of_payload"])
    with (d / "grid.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rate_mbit", "rtt_ms", "flows", "cc"] + [f"{m}_{x}" for m in MODES for x in DIRS])
        for c in cells:
            w.writerow(list(c) + [table.get(c + (m, x), "") for m in MODES for x in DIRS])
    lines = ["| rate | RTT ms | flows | cc | " + " | ".join(f"{m} {x[:2] if x == 'upload' else 'down'}"
                                                          for m in MODES for x in DIRS) + " |",
             "|---" * (4 + len(MODES) * len(DIRS)) + "|"]
    for c in cells:
        vals = []
        for m in MODES:
            for x in DIRS:
                v = table.get(c + (m, x))
                vals.append("" if v is None else (f"**{v:.3f}**" if m != "htb" and v < 0.95 else f"{v:.3f}"))
        lines.append(f"| {c[0]:g} Mbit/s | {c[1]:g} | {c[2]} | {c[3]} | " + " | ".join(vals) + " |")
    (d / "grid.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(max(8, 0.3 * len(cells) * len(MODES)), 4.5))
    w = 0.8 / (len(MODES) * len(DIRS))
    for i, (m, x) in enumerate((m, x) for m in MODES for x in DIRS):
        ax.bar([j + i * w for j in range(len(cells))], [table.get(c + (m, x), 0) for c in cells], w,
               label=f"{m} {x}", hatch="//" if x == "download" else None)
    ax.axhline(0.95, color="k", lw=0.8, ls="--")
    ax.set_xticks([j + 0.4 - w / 2 for j in range(len(cells))])
    ax.set_xticklabels([f"{c[0]:g}M {c[1]:g}ms\n{c[2]}x {c[3]}" for c in cells], fontsize=7)
    ax.set_ylim(0.6, 1.12)
    ax.set_ylabel("steady goodput / payload the class carries")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(d / "grid.png", dpi=120)


if __name__ == "__main__":
    main()

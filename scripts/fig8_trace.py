#!/usr/bin/env python3
"""One cell of the paper's Fig. 8 (N uploads into a 500 kB/s class with a class queue limit),
traced: per run, the resent ratio, drops, goodput and queue, then every 0.5 s the class's
drops (d), queue (q) and kB sent, and the class's count of sending flows. A diagnostic for
regressions of scripts/paper_experiments.py's fig8 (e.g. tcr at 32 flows, limit 9: 3.1 %
resent at 80a6b77, 7.4 % at b30e1a7); run it on two builds side by side with
WEIR_BUILD_DIR=... (as root, testbed lock held).

Usage: scripts/fig8_trace.py MODE FLOWS LIMIT [REPS]      e.g. scripts/fig8_trace.py tcr 32 9 3
"""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paper_experiments as pe  # noqa: E402
from weirtb import PathSpec  # noqa: E402

samplers = []
extra = []


class TracingSampler(pe.Sampler):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        samplers.append(self)


_counters = pe.gateway_counters


def traced_counters(tb):
    r = _counters(tb)
    try:
        c = tb.weir_stats()["shaping"]["outbound"]["classes"]["exp"]
        extra.append((r[0], c.get("flows_sending")))
    except (KeyError, OSError, ValueError):
        pass
    return r


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    mode, n, lim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    pe.Sampler = TracingSampler
    pe.gateway_counters = traced_counters
    cfg = Path(tempfile.mkdtemp())
    tb = pe.testbed([PathSpec(delay=25)])
    try:
        for _ in range(reps):
            r = pe.run(tb, cfg, mode, 500, n, 14, limit=lim, cc=pe.SENDER_CC, probe=False)
            print(f"{mode} n={n} lim={lim}: retx {r['retx_ratio']:.4f} drops {r['drops']} "
                  f"goodput {r['goodput_kBps']:.0f} kB/s q {r['data_pkts_mean']:.1f}/"
                  f"{r['data_pkts_peak']} acks held peak {r['acks_held_peak']}")
            rows = samplers[-1].rows
            prev, out, t = rows[0], [], 0.5
            for x in rows:
                if x[0] >= t:
                    out.append(f"{t:.1f}:d{x[4] - prev[4]} q{x[1]} kB{(x[2] - prev[2]) // 1000}")
                    prev, t = x, t + 0.5
            print("  " + " ".join(out), flush=True)
            print("  sending:", " ".join(str(e[1]) for e in extra[::5]))
            extra.clear()
    finally:
        tb.down()


if __name__ == "__main__":
    main()

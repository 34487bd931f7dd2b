#!/usr/bin/python3
"""Trace one Fig. 11-style TCP flow through the testbed, and read the trace.

    scripts/trace_flow.py run MODE CC RATE_KBPS LOSS_EVERY SECONDS OUTDIR
    scripts/trace_flow.py analyse OUTDIR [FROM TO]

`run` brings the testbed up with one 25 ms path with periodic loss 1/LOSS_EVERY, runs
weir's class in MODE (or `htb`) at RATE_KBPS with one iperf3 flow using CC for SECONDS,
and keeps: tcpdump of the sender's (l1) and receiver's (w1) eth0, headers only
(l1.pcap, w1.pcap), `ss -tin` of the sender every 0.25 s (ss.txt) and the run's
figures (result.json). `analyse` reads l1.pcap: retransmissions and how long the sender
had been silent before each, stalls of the cumulative ACK over 0.8 s, the sender's
silences over 0.5 s; with FROM TO (seconds) it also prints every segment and ACK in
that window, sequence numbers relative to the SYN. docs/postack.md (Fig. 11, "What a
slow class costs a new flow") was read off such traces. Root, Debian's python3 (scapy).
"""
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def run(mode, cc, rate, every, secs, out):
    import paper_experiments as pe
    from weirtb import PathSpec
    out.mkdir(parents=True, exist_ok=True)
    tb = pe.testbed([PathSpec(delay=25, ploss=every)])
    (out / "cfg").mkdir(exist_ok=True)
    try:
        l1, w1 = tb.lan_hosts[0], tb.wan_hosts[0]
        filt = ["tcp", "and", "portrange", f"{pe.CPORT}-{pe.CPORT + 99}"]
        dumps = [tb.popen(h, ["tcpdump", "-i", "eth0", "-s", "160", "-w", str(out / f"{n}.pcap")] + filt,
                          stderr=subprocess.DEVNULL) for h, n in ((l1, "l1"), (w1, "w1"))]
        stop, ss = threading.Event(), []

        def sample():
            while not stop.is_set():
                r = tb.run(l1, ["ss", "-tin", "sport", ">=", f":{pe.CPORT}"], check=False)
                ss.append((time.time(), r.stdout))
                time.sleep(0.25)
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        time.sleep(1)   # tcpdump is listening
        r = pe.run(tb, out / "cfg", mode, rate, 1, secs, cc=cc, probe=False)
        stop.set()
        th.join()
        time.sleep(1)
        for d in dumps:
            d.terminate()
            d.communicate()
        r.pop("series", None)
        (out / "result.json").write_text(json.dumps(r, indent=1))
        (out / "ss.txt").write_text("".join(f"@{t:.3f}\n{s}\n" for t, s in ss))
        print(f"{mode} {cc} {rate} KB/s: goodput {r['goodput_kBps']:.2f} KB/s "
              f"({r['goodput_kBps'] / rate:.3f} of target), class {r['class_kBps']:.2f} KB/s "
              f"on the wire, retx {r['retx_ratio']:.3f}")
    finally:
        tb.down()


def after(a, b):
    """a is after b in sequence space (RFC 1982)."""
    return 0 < ((a - b) & 0xffffffff) < 0x80000000


def analyse(out, window=None):
    from scapy.all import IP, TCP, PcapReader
    segs, acks, sender, isn, t0 = [], [], None, 0, None

    def rel(x):
        return (x - isn) & 0xffffffff

    for p in PcapReader(str(out / "l1.pcap")):
        if IP not in p or TCP not in p:
            continue
        ip, tcp, t = p[IP], p[TCP], float(p.time)
        t0 = t if t0 is None else t0
        if sender is None and tcp.flags & 0x02 and not tcp.flags & 0x10:
            sender, isn = ip.src, tcp.seq
        plen = ip.len - ip.ihl * 4 - tcp.dataofs * 4
        sack = next((o[1] for o in tcp.options if o[0] == "SAck"), ())
        if ip.src == sender and plen > 0:
            segs.append((t - t0, tcp.seq, plen))
        elif ip.dst == sender and tcp.flags & 0x10 and plen == 0:
            acks.append((t - t0, tcp.ack, sack))
        if window and window[0] <= t - t0 <= window[1]:
            if ip.src == sender:
                print(f"{t - t0:8.3f} >  seq {rel(tcp.seq):8d} len {plen:4d} {tcp.sprintf('%flags%')}")
            else:
                print(f"{t - t0:8.3f} <  ack {rel(tcp.ack):8d} win {tcp.window} "
                      f"{[rel(x) for x in sack] or ''}")
    retx, hi, last = [], None, None
    for t, s, n in segs:
        end = (s + n) & 0xffffffff
        if hi is not None and not after(end, hi):
            retx.append((t, rel(s), t - last))
        else:
            hi = end
        last = t
    print(f"{len(segs)} data segments, {len(acks)} pure ACKs "
          f"({sum(1 for a in acks if a[2])} with SACK), {len(retx)} retransmissions")
    for t, s, gap in retx:
        print(f"  retransmission at {t:7.2f} s, seq {s}, {gap * 1000:.0f} ms after the sender's last segment")
    stalls, pt, pa = [], None, None
    for t, a, _ in acks:
        if pa is None or after(a, pa):
            if pt is not None and t - pt > 0.8:
                stalls.append((pt, t - pt))
            pt, pa = t, a
    print(f"cumulative ACK stalled over 0.8 s: {len(stalls)} times, {sum(d for _, d in stalls):.2f} s")
    for t, d in stalls:
        print(f"  at {t:7.2f} s for {d:.2f} s")
    gaps = [(segs[i - 1][0], segs[i][0] - segs[i - 1][0]) for i in range(1, len(segs))
            if segs[i][0] - segs[i - 1][0] > 0.5]
    print(f"sender silent over 0.5 s: {len(gaps)} times, {sum(d for _, d in gaps):.2f} s")
    for t, d in gaps:
        print(f"  at {t:7.2f} s for {d:.2f} s")


def main():
    a = sys.argv[1:]
    if len(a) == 7 and a[0] == "run":
        run(a[1], a[2], float(a[3]), int(a[4]), int(a[5]), Path(a[6]))
    elif len(a) in (2, 4) and a[0] == "analyse":
        analyse(Path(a[1]), (float(a[2]), float(a[3])) if len(a) == 4 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

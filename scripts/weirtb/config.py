"""weir's configs for the tests and scripts, written once.

weir_config_text: weir on virtual ports (net_null, net_pcap), no namespaces: EAL
without hugepages, one management and one worker lcore, the two ports, the mempool.
testbed_config_text: weir in the namespace testbed, conf/testbed.cfg.
Callers append what they test (flows, shaping, rules, management...) as `body`."""

import json
from pathlib import Path

CONF = Path(__file__).resolve().parents[2] / "conf"


def weir_config_text(lan, wan, *, prefix, mem_mb=256, eal_log_level="error", mbufs=8191,
                     cache=128, body=""):
    """The config text: `lan` and `wan` are DPDK device strings ("net_null0",
    "net_pcap0,rx_pcap=..."), `prefix` is EAL's --file-prefix (unique per running
    weir), `eal_log_level` None leaves EAL's log level alone."""
    eal = ["--no-huge", "-m", str(mem_mb), "--no-pci", f"--file-prefix={prefix}"]
    if eal_log_level:
        eal.append(f"--log-level={eal_log_level}")
    return (f"eal = [{', '.join(json.dumps(a) for a in eal)}];\n"
            'log_level = "error";\n'
            "lcores = { management = 0; workers = [1]; };\n"
            "ports = {\n"
            f'  lan = {{ device = "{lan}"; }};\n'
            f'  wan = {{ device = "{wan}"; }};\n'
            "};\n"
            f"mempool = {{ mbufs = {mbufs}; cache = {cache}; }};\n"
            + body)


# Bucket depth (shaping.burst_us) with several workers on the testbed's 2 vCPUs: 3 or
# more threads take turns on 2 cores and a worker comes back to its classes several ms
# late; with the default 1 ms, 3 workers lost 9-14 % of two classes' rates (docs/multiworker.md).
SHARED_CORES_BURST_US = 5000


def testbed_config_text(body="", *, stats_interval=None, workers=1):
    """conf/testbed.cfg (weir between gw-lan and gw-wan), its stats written every
    `stats_interval` s instead of 1 s, then a blank line and `body`.

    workers > 1: that many workers, each polling one queue of both af_packet
    ports (qpairs=N, the kernel's PACKET_FANOUT hash spreads the flows:
    ports.distribution = "kernel-fanout"). The machine has 2 vCPUs, so EAL's
    --lcores lets the management lcore and every worker float over both CPUs
    (the workers sleep when idle) instead of pinning N + 1 threads to 2 cores, and a
    shaping group in `body` gets burst_us = SHARED_CORES_BURST_US unless it sets one."""
    text = (CONF / "testbed.cfg").read_text()
    if stats_interval is not None:
        text = text.replace("interval = 1.0;", f"interval = {stats_interval};")
    if workers > 1:
        lcores = ",".join(f"{i}@(0-1)" for i in range(workers + 1))
        ids = ", ".join(str(i) for i in range(1, workers + 1))
        for old, new in (
                ('"--log-level=notice"]', f'"--log-level=notice", "--lcores={lcores}"]'),
                ("workers = [1];", f"workers = [{ids}];"),
                ("qdisc_bypass=1\"; };\n  wan", f"qdisc_bypass=1,qpairs={workers}\"; }};\n  wan"),
                ("qdisc_bypass=1\"; };\n};", f"qdisc_bypass=1,qpairs={workers}\"; }};\n"
                                            '  distribution = "kernel-fanout";\n};')):
            assert old in text, old
            text = text.replace(old, new)
        if "burst_us" not in body:
            body = body.replace("shaping = {", f"shaping = {{ burst_us = {SHARED_CORES_BURST_US};", 1)
    return text + "\n" + body


def conf_body(name):
    """A conf/ file without its @include lines: the shaping and rules of e.g.
    conf/testbed-twoclass.cfg, to give testbed_config_text as its body."""
    return "\n".join(line for line in (CONF / name).read_text().splitlines()
                     if not line.startswith("@include"))

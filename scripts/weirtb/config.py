"""weir's config for the tests and scripts that run weir on virtual ports (net_null,
net_pcap), written once: EAL without hugepages, one management and one worker lcore,
the two ports, the mempool. Callers append what they test (flows, shaping, rules,
management...) as `body`. The namespace testbed's config is conf/testbed.cfg."""

import json


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

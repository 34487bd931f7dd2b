"""Config errors: each class of mistake is reported as FILE:LINE: message, exit non-zero,
before EAL or any port is touched (checked by running the real binary)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build"))
WEIR = BUILD / "app" / "weir" / "weir"

pytestmark = pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}")

sys.path.insert(0, str(REPO / "scripts"))
from weirtb import weir_config_text  # noqa: E402


def good(tag):
    """A valid config on net_null ports; `tag` makes EAL's file prefix unique."""
    return weir_config_text("net_null0", "net_null1", prefix=f"wcfg-{tag}", mem_mb=128,
                            eal_log_level=None,
                            body="flows = { capacity = 1024; timeouts = { udp = 30; }; };\n")


def run_weir(tmp_path, text, *extra, timeout=60):
    cfg = tmp_path / "weir.cfg"
    cfg.write_text(text)
    p = subprocess.run([str(WEIR), "--", "--config", str(cfg), *extra],
                       capture_output=True, text=True, timeout=timeout)
    return cfg, p


def line_of(text, needle):
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in config")


def test_good_config_checks_ok(tmp_path):
    cfg, p = run_weir(tmp_path, good("ok"), "--check")
    assert p.returncode == 0, p.stderr
    assert f"{cfg}: OK" in p.stdout


def test_shipped_configs_are_valid():
    for name in ("weir.cfg", "testbed.cfg", "testbed-shaped.cfg", "testbed-twoclass.cfg"):
        p = subprocess.run([str(WEIR), "--", "--config", str(REPO / "conf" / name), "--check"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, f"{name}: {p.stderr}"


# Class trees and rules, one setting per line so errors can be pinned to it.
SHAPING = """
shaping = {
  outbound = {
    rate = "30mbit";
    default = "bulk";
    classes = (
      { name = "gold"; rate = "20mbit"; prio = 0; },
      { name = "bulk"; rate = "10mbit"; prio = 1; }
    );
  };
  inbound = "30mbit";
};
rules = (
  { class = "gold"; proto = "tcp"; wan_port = "5201-5204"; },
  { class = "bulk"; dscp = ["EF", "AF41"]; lan = "10.0.0.0/8"; dir = "out"; }
);
"""


def shaped(old, new):
    return lambda t: t + SHAPING.replace(old, new)


def test_ipabr_sws_credit_checks_ok(tmp_path):
    """shaping.ipabr.sws_credit (docs/ipabr.md) takes true or false, headroom_us 0 or more."""
    for v in ("true", "false"):
        text = shaped('inbound = "30mbit";',
                      f'inbound = "30mbit";\n  ipabr = {{ sws_credit = {v}; headroom_us = 0; }};')(
                          good(f"sws{v}"))
        cfg, p = run_weir(tmp_path, text, "--check")
        assert p.returncode == 0, p.stderr


def test_last_mile_config_checks_ok(tmp_path):
    text = SHAPING.replace('prio = 1; }', 'prio = 1; last_mile = { rate = "56kbit"; rtt = 350; '
                           'buffer = 10; exempt = true; side = "wan"; }; }')
    text = text.replace('dir = "out"; }', 'dir = "out"; last_mile = "off"; }')
    assert "last_mile" in text
    cfg, p = run_weir(tmp_path, good("lm") + text, "--check")
    assert p.returncode == 0, p.stderr


def test_lastmile_doc_example_checks_ok(tmp_path):
    """docs/lastmile.md's configuration example is valid."""
    doc = (REPO / "docs" / "lastmile.md").read_text()
    example = doc.split("```\n", 2)[1]
    assert "last_mile" in example
    cfg, p = run_weir(tmp_path, good("lmdoc") + example, "--check")
    assert p.returncode == 0, p.stderr


def test_classes_and_rules_check_ok(tmp_path):
    cfg, p = run_weir(tmp_path, good("cls") + SHAPING, "--check")
    assert p.returncode == 0, p.stderr


def test_fifo_queue_managers_check_ok(tmp_path):
    """docs/pqm.md's settings: a fifo class with each queue manager, the defaults."""
    for qm in ("red", "choke", "pqm", "pqm-pb", "none"):
        text = SHAPING.replace('prio = 1;', f'prio = 1; mode = "fifo"; limit = 94; aqm = "{qm}";')
        text = text.replace('inbound = "30mbit";', 'inbound = "30mbit";\n  aqm = "pqm-pb";\n'
                            '  red = { min_th = 31; max_th = 62; max_p = 0.1; };\n'
                            '  pqm = { gamma = 0.016; target = 6; monitor = 128; };')
        cfg, p = run_weir(tmp_path, good(f"qm-{qm}") + text, "--check")
        assert p.returncode == 0, (qm, p.stderr)


def test_documented_examples_check_ok(tmp_path):
    """The class and rule examples in docs/classes.md and conf/weir.cfg are valid."""
    doc = (REPO / "docs" / "classes.md").read_text()
    example = doc.split("```\n", 2)[1]
    cfg, p = run_weir(tmp_path, good("doc") + example, "--check")
    assert p.returncode == 0, p.stderr
    text = (REPO / "conf" / "weir.cfg").read_text()
    start = text.index("  # inbound = {")
    block = re.sub(r"^(\s*)# ", r"\1", text[start:text.index("  overhead")], flags=re.M)
    rules = text[text.index("# rules = ("):]
    rules = re.sub(r"^# ?", "", rules[:rules.index("# );") + 4], flags=re.M)
    cfg, p = run_weir(tmp_path, good("wcfg") + "shaping = {\n" + block + "};\n" + rules,
                      "--check")
    assert p.returncode == 0, p.stderr + cfg.read_text()


# (what to change, the line that must be named, a regexp the message must match)
BAD = [
    ("unknown class in rule", shaped('class = "gold"; proto', 'class = "silver"; proto'),
     "silver", r"rule 1: class 'silver' is not defined in either direction"),
    ("default not a class", shaped('default = "bulk"', 'default = "blk"'),
     'outbound = {', r"outbound: default class 'blk' is not one of its classes"),
    ("class without rate", shaped('rate = "10mbit"; prio = 1;', 'prio = 1;'),
     'name = "bulk"', r"class 'bulk' needs a rate"),
    ("ceil below rate", shaped('rate = "20mbit"; prio = 0;', 'rate = "20mbit"; ceil = "5mbit";'),
     'name = "gold"', r"ceil \(5000000 bit/s\) is below its rate"),
    ("duplicate class", shaped('name = "bulk"', 'name = "gold"'),
     'rate = "10mbit"', r"class 'gold' is defined twice"),
    ("unknown parent", shaped('name = "bulk";', 'name = "bulk"; parent = "staff";'),
     'name = "bulk"', r"parent 'staff' is not defined before it"),
    ("classes without default", shaped('default = "bulk";', ''),
     'outbound = {', r"needs default = "),
    ("bad admission", shaped('prio = 1;', 'prio = 1; flow_min = "1mbit"; admission = "maybe";'),
     'maybe', r"admission must be \"drop\" or \"fallback\""),
    ("bad prefix", shaped('lan = "10.0.0.0/8"', 'lan = "10.0.0.0/33"'),
     "10.0.0.0/33", r"'lan' must be an address or prefix"),
    ("host bits in prefix", shaped('lan = "10.0.0.0/8"', 'lan = "10.1.0.0/8"'),
     "10.1.0.0/8", r"rule 2: lan prefix: address has bits set past /8"),
    ("bad port range", shaped('"5201-5204"', '"5204-5201"'),
     "5204-5201", r"'wan_port' must be a port"),
    ("bad dscp name", shaped('"AF41"', '"AF51"'),
     "AF51", r"'dscp' must be 0-63, a name"),
    ("bad spi", shaped('dir = "out"', 'spi = 0'),
     "spi = 0", r"'spi' must be an SPI 1-4294967295"),
    ("spi with tcp", shaped('wan_port = "5201-5204";', 'spi = "0x1000-0x1fff";'),
     'spi = "0x1000', r"rule 1: an SPI with protocol 6"),
    ("last_mile without rtt", shaped('prio = 1; }', 'prio = 1; last_mile = { rate = "56kbit"; }; }'),
     'last_mile = {', r"last_mile needs rtt"),
    ("last_mile bad side", shaped('dir = "out"', 'last_mile = { rate = "56kbit"; rtt = 350; side = "up"; }'),
     'side = "up"', r"last_mile.side must be"),
    ("last_mile off in a class", shaped('prio = 1; }', 'prio = 1; last_mile = "off"; }'),
     'last_mile = "off"', r"last_mile must be a group"),
    ("bad proto", shaped('proto = "tcp"', 'proto = "tcpp"'),
     "tcpp", r"'proto' must be tcp, udp"),
    ("bad dir", shaped('dir = "out"', 'dir = "up"'),
     'dir = "up"', r"'dir' \(who opened the flow\)"),
    ("unknown rule key", shaped('dir = "out"', 'dport = 80'),
     "dport", r"unknown setting 'rules\.dport'"),
    ("rules without shaping", lambda t: t + 'rules = ( { class = "x"; } );\n',
     "rules = (", r"'rules' need shaping"),
    ("syntax", lambda t: t.replace("capacity = 1024;", "capacity = = 1024;"),
     "capacity", r"syntax error"),
    ("unknown key", lambda t: t.replace("cache = 128;", "cache = 128; mbfus = 3;"),
     "mbfus", r"unknown setting 'mempool\.mbfus'"),
    ("unknown top-level group", lambda t: t + "policing = { x = 1; };\n",
     "policing", r"unknown setting 'policing'"),
    ("wrong type", lambda t: t.replace("capacity = 1024;", 'capacity = "many";'),
     "capacity", r"'flows\.capacity' must be an integer"),
    ("out of range", lambda t: t.replace("capacity = 1024;", "capacity = 3;"),
     "capacity", r"'flows\.capacity' is 3; it must be between"),
    ("timeout range", lambda t: t.replace("udp = 30;", "udp = 0;"),
     "udp = 0", r"'flows\.timeouts\.udp' is 0"),
    ("bad log level", lambda t: t.replace('"error"', '"loud"'),
     "log_level", r"'log_level' is \"loud\""),
    ("missing ports", lambda t: re.sub(r"ports = \{.*?\n\};\n", "", t, flags=re.S),
     None, r"missing group 'ports'"),
    ("missing device", lambda t: t.replace('device = "net_null1";', ""),
     "wan = {", r"missing setting 'ports\.wan\.device'"),
    ("same device", lambda t: t.replace('"net_null1"', '"net_null0"'),
     "wan = {", r"same device"),
    ("ipfix collector by name", lambda t: t + '\nexport = { ipfix = {\n collector = "nfc:4739"; }; };\n',
     'collector = "nfc', r"'export.ipfix.collector': 'nfc:4739' is not ADDRESS:PORT"),
    ("ipfix without collector", lambda t: t + "\nexport = { ipfix = { domain = 2; }; };\n",
     "export = {", r"collector"),
    ("capture ring not a power of 2", lambda t: t + "\ncapture = {\n ring = 1000; };\n",
     "ring = 1000", r"'capture.ring' must be a power of 2"),
    ("unknown capture key", lambda t: t + "\ncapture = {\n size = 1; };\n",
     "size = 1", r"size"),
    ("worker is management", lambda t: t.replace("workers = [1]", "workers = [0]"),
     "workers = [", r"lcore 0 is the management lcore"),
    ("duplicate worker", lambda t: t.replace("workers = [1]", "workers = [1, 1]"),
     "workers = [", r"lcore 1 is listed twice"),
    ("empty workers", lambda t: t.replace("workers = [1]", "workers = []"),
     "workers = [", r"'lcores\.workers' is empty"),
    ("mbuf budget", lambda t: t.replace("mbufs = 8191;", "mbufs = 2000;"),
     "mbufs", r"'mempool\.mbufs' is 2000 but 1 workers .* need at least \d+"),
    ("bad rate unit", lambda t: t + 'shaping = { outbound = "20furlongs"; };\n',
     "furlongs", r"'shaping\.outbound' must be a rate"),
    ("rate out of range", lambda t: t + 'shaping = { inbound = "1bit"; };\n',
     "1bit", r"'shaping\.inbound' is 1 bit/s; it must be 0 \(unshaped\) or between"),
    ("malformed_pps range", lambda t: t + "worker = { malformed_pps = -1; };\n",
     "malformed_pps = -1", r"'worker\.malformed_pps' is -1; it must be between 0 and"),
    ("aqm needs fifo", shaped('prio = 1;', 'prio = 1; aqm = "pqm";'),
     'aqm = "pqm"', r"aqm manages a fifo leaf's one queue: the class needs mode = \"fifo\""),
    ("unknown class aqm", shaped('prio = 1;', 'prio = 1; mode = "fifo"; aqm = "sfb";'),
     '"sfb"', r"a class's aqm must be \"none\", \"red\", \"choke\", \"pqm\" or \"pqm-pb\""),
    ("unknown shaping aqm", shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  aqm = "blue";'),
     '"blue"', r"aqm must be \"codel\", \"none\", \"red\", \"choke\", \"pqm\" or \"pqm-pb\""),
    ("red thresholds", shaped('inbound = "30mbit";',
                              'inbound = "30mbit";\n  red = { min_th = 50; max_th = 40; };'),
     "red = {", r"min_th must be below max_th"),
    ("max_th above limit",
     lambda t: t + SHAPING.replace('prio = 1;', 'prio = 1; mode = "fifo"; limit = 30; aqm = "red";')
     .replace('inbound = "30mbit";', 'inbound = "30mbit";\n  red = { max_th = 60; };'),
     'name = "bulk"', r"class 'bulk': aqm \"red\": max_th is above the class limit"),
    ("burst_us range", shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  burst_us = 50;'),
     "burst_us = 50", r"'shaping\.burst_us' is 50; it must be between 100 and"),
    ("new_quanta range", shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  new_quanta = 0;'),
     "new_quanta = 0", r"'shaping\.new_quanta' is 0; it must be between 1 and 16"),
    ("new_flows not bool", shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  new_flows = 1;'),
     "new_flows = 1", r"'shaping\.new_flows' must be true or false"),
    ("pqm phi", shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  pqm = { phi = 0.5; };'),
     "phi = 0.5", r"'shaping\.pqm\.phi' is 0\.5; it must be between"),
    ("group expected", lambda t: t.replace("mempool = { mbufs = 8191; cache = 128; };", "mempool = 5;"),
     "mempool", r"'mempool' must be a group"),
    ("postack clamp not bool",
     shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  postack = { clamp = 1; };'),
     "clamp = 1", r"'shaping\.postack\.clamp' must be true or false"),
    ("postack clamp target",
     shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  postack = { clamp_target_ms = -1; };'),
     "clamp_target_ms", r"'shaping\.postack\.clamp_target_ms' is -1; it must be between 0 and"),
    ("postack clamp margin",
     shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  postack = { clamp_margin = 4.5; };'),
     "clamp_margin", r"'shaping\.postack\.clamp_margin' is 4\.5; it must be between 0 and 4"),
    ("postack clamp margin not number",
     shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  postack = { clamp_margin = "half"; };'),
     "clamp_margin", r"'shaping\.postack\.clamp_margin' must be a number"),
    ("ipabr headroom out of range",
     shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  ipabr = { headroom_us = -5; };'),
     "headroom_us", r"'shaping\.ipabr\.headroom_us' is -5; it must be between 0 and 100000"),
    ("ipabr sws_credit not bool",
     shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  ipabr = { sws_credit = 2; };'),
     "sws_credit = 2", r"'shaping\.ipabr\.sws_credit' must be true or false"),
    ("pep copies overcommit the pool",
     shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  pep = { copies = 6000; };'),
     "mbufs", r"'mempool\.mbufs' is 8191 but the rings and caches \(\d+\), held ACKs and pep "
              r"copies .*: \d+\) and the class trees \(\d+\) need \d+"),
    ("pep copies too few",
     shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  pep = { copies = 3; };'),
     "copies = 3", r"'shaping\.pep\.copies' must be -1 \(auto\) or at least 16"),
    ("pep drain out of range",
     shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  pep = { drain_ms = 20000; };'),
     "drain_ms", r"'shaping\.pep\.drain_ms' is 20000; it must be between 0 and 10000"),
    ("pep watermark unknown",
     shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  pep = { watermark = "bbr"; };'),
     'watermark = "bbr"', r"'shaping\.pep\.watermark' is \"bbr\"; expected \"class\" or \"measured\""),
    ("ipabr unknown key",
     shaped('inbound = "30mbit";', 'inbound = "30mbit";\n  ipabr = { credit = false; };'),
     "credit = false", r"unknown setting 'shaping\.ipabr\.credit'"),
]


@pytest.mark.parametrize("name,mutate,needle,message", BAD, ids=[b[0] for b in BAD])
def test_config_error_names_file_and_line(tmp_path, name, mutate, needle, message):
    text = mutate(good(name.replace(" ", "-")))
    cfg, p = run_weir(tmp_path, text, "--check")
    assert p.returncode != 0
    err = p.stderr.strip()
    m = re.match(rf"^{re.escape(str(cfg))}:(\d+): (.*)$", err)
    assert m, f"not FILE:LINE: message: {err!r}"
    assert re.search(message, m.group(2)), err
    if needle is not None:
        assert int(m.group(1)) == line_of(text, needle), err


def test_missing_file(tmp_path):
    p = subprocess.run([str(WEIR), "--", "--config", str(tmp_path / "nope.cfg")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    assert re.match(rf"^{re.escape(str(tmp_path / 'nope.cfg'))}:0: cannot read file", p.stderr)


def test_usage_errors():
    p = subprocess.run([str(WEIR), "--", "--bogus"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    p = subprocess.run([str(WEIR)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "--config FILE is required" in p.stderr


def test_unknown_device_is_reported_with_its_line(tmp_path):
    text = good("nodev").replace('"net_null1"', '"net_nosuchpmd0"')
    cfg, p = run_weir(tmp_path, text)
    assert p.returncode != 0
    assert re.search(rf"{re.escape(str(cfg))}:{line_of(text, 'net_nosuchpmd0')}: "
                     r"ports\.wan\.device net_nosuchpmd0: no such device", p.stderr), p.stderr


def test_worker_lcore_not_in_eal_list(tmp_path):
    text = good("lcore").replace('"--no-pci",', '"--no-pci", "-l", "0",')
    cfg, p = run_weir(tmp_path, text)
    assert p.returncode != 0
    assert re.search(rf"{re.escape(str(cfg))}:{line_of(text, 'lcores')}: worker lcore 1 is not "
                     r"enabled", p.stderr), p.stderr


def test_null_ports_run_and_stop_cleanly(tmp_path):
    """net_null ports: the worker forwards at full speed; SIGTERM stops weir with
    final counters and every mbuf back in the pool."""
    stats = tmp_path / "stats.json"
    cfg = tmp_path / "weir.cfg"
    cfg.write_text(good("run").replace("log_level", 'stats = { interval = 0.2; };\nlog_level'))
    p = subprocess.Popen([str(WEIR), "--", "--config", str(cfg), "--stats-file", str(stats)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        import json
        import time
        deadline = time.time() + 20
        data = None
        while time.time() < deadline:
            if stats.exists():
                data = json.loads(stats.read_text())
                if data["ports"]["lan"]["forwarded"] > 1000:
                    break
            time.sleep(0.2)
        assert data is not None and data["ports"]["lan"]["forwarded"] > 1000
        assert data["ports"]["wan"]["tx"] > 1000
    finally:
        p.terminate()
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "final counters" in out
    assert re.search(r"mbufs in use after shutdown: 0 of", out), out


def test_lua_policy_script_checks(tmp_path):
    """policy.script: the shipped script checks; a broken one is reported at
    the script's line; a script beside shaping trees or rules is refused."""
    shipped = good("lua") + f'policy = {{ script = "{REPO / "lua" / "policy.lua"}"; }};\n'
    cfg, p = run_weir(tmp_path, shipped, "--check")
    assert p.returncode == 0, p.stderr
    (tmp_path / "bad.lua").write_text('weir.link{ dir = "outbound", rate = "30mbit" }\n'
                                      'weir.class{ dir = "outbound", name = "a", rate = "1 parsec" }\n')
    cfg, p = run_weir(tmp_path, good("lua") + 'policy = { script = "bad.lua"; };\n',
                      "--check")
    assert p.returncode != 0
    assert re.match(rf"^{re.escape(str(tmp_path / 'bad.lua'))}:2: ", p.stderr), p.stderr
    both = (good("lua") + 'policy = { script = "bad.lua"; };\n'
            'shaping = { outbound = "10mbit"; };\n')
    cfg, p = run_weir(tmp_path, both, "--check")
    assert p.returncode != 0
    assert re.match(rf"^{re.escape(str(cfg))}:\d+: shaping\.outbound and policy\.script", p.stderr), \
        p.stderr
    cfg, p = run_weir(tmp_path, good("lua") + 'policy = { script = "none.lua"; };\n',
                      "--check")
    assert p.returncode != 0 and "none.lua" in p.stderr, p.stderr

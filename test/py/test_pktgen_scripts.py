"""The Pktgen-DPDK Lua scripts of pktgen-scripts/ (issue #8), checked without Pktgen.

For every *.lua there: it parses (luac5.4 -p), it calls only names of Pktgen 23.03's Lua API
(pktgen-scripts/pktgen-api.txt; that list itself is checked against app/lpktgenlib.c when
a Pktgen source tree is at $PKTGEN_SRC, default /opt/pktgen-src) and never quits Pktgen or
clears its statistics (the runner's wrapper does both). Every load script (all but the
wrapper, whose header says "Not a load script") has a header comment naming real weir
counters, and the parameter globals of the convention (NAME = NAME or default, before any
Pktgen call). Each load script is then run in a plain Lua 5.4 interpreter against a stub
`pktgen` table that records the calls and rejects names Pktgen lacks, and argument counts
and types Pktgen's C functions would refuse or misread; the calls are checked against the
parameters (ports, rate, duration) and, per script, against what its header promises
(tuple counts of flows-1m, the class mix of classes.lua against its config, the ACK rate
of tcp-bulk-acks.lua against the pcaps). make-pcaps runs, and its pcaps parse with scapy
and hold what malformed.lua's and tcp-bulk-acks.lua's headers say. The runner's --zero-loss
search (its bisection, its pass/fail verdict on a run's summary, its arguments) is
checked with fake trials.

Needs lua5.4 (Debian: apt-get install lua5.4) and Debian's python3-scapy:
    /usr/bin/python3 -m pytest test/py/test_pktgen_scripts.py
Also, without pytest: /usr/bin/python3 test/py/test_pktgen_scripts.py --api LPKTGENLIB_C
prints the API list (to regenerate pktgen-scripts/pktgen-api.txt for another Pktgen tag).
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "pktgen-scripts"
API_FILE = SCRIPTS / "pktgen-api.txt"
MAKE_PCAPS = SCRIPTS / "make-pcaps"
PKTGEN_SRC = Path(os.environ.get("PKTGEN_SRC", "/opt/pktgen-src"))
LPKTGENLIB = PKTGEN_SRC / "app" / "lpktgenlib.c"
BUILD = Path(os.environ.get("WEIR_BUILD_DIR", REPO / "build"))
PARSE_PCAP = BUILD / "test" / "unit" / "parse_pcap"
WEIR = BUILD / "app" / "weir" / "weir"
LUA = shutil.which("lua5.4")
LUAC = shutil.which("luac5.4")

PARAMS = ["RATE_PCT", "PKT_SIZE", "FLOWS", "DURATION", "TX_PORT", "RX_PORT", "PCAP_DIR"]
FORBIDDEN = {"pktgen.quit", "pktgen.clear", "pktgen.clr"}
POOL = 24576            # Pktgen 23.03's MAX_MBUFS_PER_PORT: mbufs of a range/seq/pcap pool
N_PORTS = 2             # the runner gives Pktgen two ports


def lua_api(src):
    """Names Pktgen's Lua library registers (pktgen.X, pktgen.range.X, pktgen.info.X), from
    lpktgenlib.c's text. Entries under #if (ping6, bonding) depend on build options: left out."""
    names = set()
    for table, prefix in (("pktgenlib", "pktgen."), ("pktgenlib_range", "pktgen.range.")):
        m = re.search(r"static const luaL_Reg %s\[\] = \{(.*?)\{NULL, NULL\}\};" % table, src, re.S)
        depth = 0
        for line in m.group(1).splitlines():
            s = line.strip()
            if s.startswith("#if"):
                depth += 1
            elif s.startswith("#endif"):
                depth -= 1
            elif depth == 0:
                names.update(prefix + n for n in re.findall(r'\{"([^"]+)",\s*\w+\}', s))
    m = re.search(r"luaopen_pktgen\(lua_State \*L\)\n\{(.*?)\n\}", src, re.S)
    names.update("pktgen.info." + n for n in re.findall(r'setf_(?:string|integer)\(L, "(\w+)"', m.group(1)))
    return sorted(names)


def lua_arities(src):
    """Lua name -> the argument counts its C function accepts (the `case N:` of its
    switch (lua_gettop(L))), or None when it does not check."""
    cfunc = {}
    for table, prefix in (("pktgenlib", "pktgen."), ("pktgenlib_range", "pktgen.range.")):
        m = re.search(r"static const luaL_Reg %s\[\] = \{(.*?)\{NULL, NULL\}\};" % table, src, re.S)
        for name, fn in re.findall(r'\{"([^"]+)",\s*(\w+)\}', m.group(1)):
            cfunc[prefix + name] = fn
    out = {}
    for name, fn in cfunc.items():
        m = re.search(r"\n%s\(lua_State \*L[^)]*\)\n\{(.*?)\n\}" % re.escape(fn), src, re.S)
        body = m.group(1) if m else ""
        sw = re.search(r"switch \(lua_gettop\(L\)\) \{(.*?)\n    \}", body, re.S)
        out[name] = {int(n) for n in re.findall(r"case (\d+):", sw.group(1))} if sw else None
    return out


def read_api():
    return [line.strip() for line in API_FILE.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


# What the stub accepts, from reading lpktgenlib.c and the pktgen-cmds.c functions it calls.
# Each entry: the argument lists Pktgen takes (one per accepted count). Types:
#   port   a portlist: "all", "0", "0-1", "0,1" or a port number (luaL_checkstring takes numbers)
#   int    an integer-valued number (luaL_checkinteger); num: any number (luaL_checknumber)
#   str    a string (or number); state: on/off/enable/disable/start/stop (Pktgen's estate()
#          silently reads anything else as "off", so a typo would not fail there)
#   mac, ip (IPv4/IPv6 address), ipnet (address with an optional /prefix)
#   enum:a|b   one of these strings; table: a Lua table
_WHAT = "enum:start|min|max|inc|minimum|maximum|increment"
_SET_WHAT = ("enum:count|size|rate|burst|txburst|rxburst|cycles|sport|dport|ttl|seq_cnt|seqCnt|"
             "prime|dump")
_SEQ = ["int", "port", "mac", "mac", "ip", "ipnet", "int", "int", "enum:ipv4|ipv6",
        "enum:udp|tcp|icmp", "int", "int"]
SIGNATURES = {
    "pktgen.set": [["port", _SET_WHAT, "num"]],
    "pktgen.start": [["port"]],
    "pktgen.stop": [["port"]],
    "pktgen.set_mac": [["port", "enum:src|dst", "mac"]],
    "pktgen.set_ipaddr": [["port", "enum:src|dst", "ipnet"]],
    "pktgen.set_proto": [["port", "enum:udp|tcp|icmp"]],
    "pktgen.set_type": [["port", "enum:ipv4|ipv6"]],
    "pktgen.pcap": [["port", "state"]],
    "pktgen.set_range": [["port", "state"]],
    "pktgen.seq": [_SEQ, _SEQ + ["int"]],
    "pktgen.seqTable": [["int", "port", "table"]],
    "pktgen.screen": [["state"]],
    "pktgen.delay": [["int"]],
    "pktgen.sleep": [["int"]],
    "pktgen.pause": [["str", "int"]],
    "pktgen.page": [["str"]],
    "pktgen.latency": [["port", "state"]],
    "pktgen.prime": [["port"]],
    "pktgen.icmp_echo": [["port", "state"]],
    "pktgen.process": [["port", "state"]],
    "pktgen.capture": [["port", "state"]],
    "pktgen.vlan": [["port", "state"]],
    "pktgen.vlanid": [["port", "int"]],
    "pktgen.isSending": [["port"]],
    "pktgen.linkState": [["port"]],
    "pktgen.pktStats": [["port"]],
    "pktgen.portStats": [["port", "enum:port|rate"]],
    "pktgen.portInfo": [["port"]],
    "pktgen.portSizes": [["port"]],
    "pktgen.portCount": [[]],
    "pktgen.totalPorts": [[]],
    "pktgen.quit": [[]],
    "pktgen.clr": [[]],
    "pktgen.clear": [["port"]],
    "pktgen.range.dst_mac": [["port", _WHAT, "mac"]],
    "pktgen.range.src_mac": [["port", _WHAT, "mac"]],
    "pktgen.range.set_type": [["port", "enum:ipv4|ipv6"]],
    "pktgen.range.src_ip": [["port", _WHAT, "ip"]],
    "pktgen.range.dst_ip": [["port", _WHAT, "ip"]],
    "pktgen.range.src_port": [["port", _WHAT, "int"]],
    "pktgen.range.dst_port": [["port", _WHAT, "int"]],
    "pktgen.range.ip_proto": [["port", "enum:udp|tcp|icmp"]],
    "pktgen.range.ttl": [["port", _WHAT, "int"]],
    "pktgen.range.pkt_size": [["port", _WHAT, "int"]],
    "pktgen.range.tos": [["port", _WHAT, "int"]],
    "pktgen.range.cos": [["port", _WHAT, "int"]],
    "pktgen.range.vlan_id": [["port", _WHAT, "int"]],
}
INFO = {"maxMbufsPerPort": POOL, "minPktSize": 64, "maxPktSize": 1518, "numSeqPkts": 16,
        "Pktgen_Version": "23.03.0", "Lua_Version": "Lua 5.4"}

STUB = r"""
-- The stub: arg[1] script, arg[2] signatures (a Lua chunk), arg[3] API list.
local script, SIG, API = arg[1], dofile(arg[2]), {}
for line in io.lines(arg[3]) do
    if line ~= "" and not line:match("^#") then API[line] = true end
end
local function enc(v)
    local t = type(v)
    if t == "string" then return (string.format("%q", v):gsub("\\\n", "\\n")) end
    if t == "number" then
        if math.type(v) == "integer" then return string.format("%d", v) end
        return string.format("%.17g", v)
    end
    if t == "boolean" then return tostring(v) end
    if t == "table" then
        local parts = {}
        for k, x in pairs(v) do parts[#parts + 1] = enc(tostring(k)) .. ":" .. enc(x) end
        table.sort(parts)
        return "{" .. table.concat(parts, ",") .. "}"
    end
    return "null"
end
local function ports(v)
    if math.type(v) == "integer" then return v >= 0 and v < NPORTS end
    if type(v) ~= "string" then return false end
    if v == "all" then return true end
    for item in v:gmatch("[^,]+") do
        local a, b = item:match("^(%d+)%-(%d+)$")
        a, b = tonumber(a or item:match("^(%d+)$")), tonumber(b or a or item:match("^(%d+)$"))
        if a == nil or b == nil or a > b or b >= NPORTS then return false end
    end
    return true
end
local STATES = { on = 1, off = 1, enable = 1, disable = 1, start = 1, stop = 1 }
local function ok(kind, v)
    if kind == "port" then return ports(v) end
    if kind == "int" then return math.type(v) == "integer" or (type(v) == "number" and math.tointeger(v) ~= nil) end
    if kind == "num" then return type(v) == "number" end
    if kind == "str" then return type(v) == "string" or type(v) == "number" end
    if kind == "table" then return type(v) == "table" end
    if kind == "state" then return type(v) == "string" and STATES[v:lower()] ~= nil end
    if kind == "mac" then
        return type(v) == "string" and (v:match("^%x%x:%x%x:%x%x:%x%x:%x%x:%x%x$") or
            v:match("^%x%x%x%x:%x%x%x%x:%x%x%x%x$")) ~= nil
    end
    if kind == "ip" or kind == "ipnet" then
        if type(v) ~= "string" then return false end
        local a, pfx = v:match("^([^/]+)/(%d+)$")
        if a and kind == "ip" then return false end
        a = a or v
        local o = { a:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$") }
        if #o == 4 then
            for _, x in ipairs(o) do if tonumber(x) > 255 then return false end end
            return pfx == nil or tonumber(pfx) <= 32
        end
        return a:match("^[%x:]+$") ~= nil and a:find(":") ~= nil
    end
    local set = kind:match("^enum:(.*)$")
    if set then
        for s in set:gmatch("[^|]+") do if v == s then return true end end
        return false
    end
    error("stub: unknown type " .. kind)
end
local function check(name, args, n)
    local sigs = SIG[name]
    if sigs == nil then return end
    local why = name .. ": Pktgen takes"
    for _, sig in ipairs(sigs) do
        why = why .. " (" .. table.concat(sig, ", ") .. ")"
        if #sig == n then
            local good = true
            for i, kind in ipairs(sig) do
                if not ok(kind, args[i]) then
                    good = false
                    why = why .. " -- argument " .. i .. " " .. enc(args[i]) .. " is not " .. kind
                end
            end
            if good then return end
        end
    end
    error(why .. "; called with " .. n .. " arguments", 3)
end
local function result(name, args)
    if name == "pktgen.portCount" or name == "pktgen.totalPorts" then return NPORTS end
    local r = { n = NPORTS }
    for p = 0, NPORTS - 1 do
        if name == "pktgen.linkState" then r[p] = "<UP-10000-FD>"
        elseif name == "pktgen.isSending" then r[p] = "n"
        else r[p] = { ipackets = 0, opackets = 0, ibytes = 0, obytes = 0, ierrors = 0, oerrors = 0,
                      imissed = 0, rx_nombuf = 0, mac_addr = string.format("02:00:00:00:00:%02x", p + 1) }
        end
    end
    return r
end
local function lib(prefix)
    return setmetatable({}, { __index = function(_, k)
        local name = prefix .. k
        if k == "range" and prefix == "pktgen." then return RANGE end
        if k == "info" and prefix == "pktgen." then return INFO end
        if not API[name] then error(name .. " is not in Pktgen's Lua API (pktgen-api.txt)", 2) end
        return function(...)
            local args, n = { ... }, select("#", ...)
            check(name, args, n)
            local parts = { enc(name) }
            for i = 1, n do parts[#parts + 1] = enc(args[i]) end
            io.stdout:write("CALL [", table.concat(parts, ","), "]\n")
            return result(name, args)
        end
    end, __newindex = function(_, k) error("a script must not change pktgen." .. tostring(k), 2) end })
end
INFO = setmetatable(INFO_VALUES, { __index = function(_, k)
    if API["pktgen.info." .. k] then return 0 end
    error("pktgen.info." .. tostring(k) .. " is not in Pktgen's Lua API", 2)
end })
RANGE = lib("pktgen.range.")
pktgen = lib("pktgen.")
local f = assert(loadfile(script))
f()
io.stdout:write("DONE\n")
"""


def lua_value(v):
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "{" + ", ".join(lua_value(x) for x in v) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join("[%s] = %s" % (json.dumps(k), lua_value(x)) for k, x in v.items()) + "}"
    raise TypeError(v)


def strip_lua_comments(src, strings=True):
    """The code of a Lua chunk with its comments blanked, lines kept; strings too unless
    `strings` (their quotes stay)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("--", i):
            m = re.match(r"--\[(=*)\[", src[i:])
            if m:
                end = src.find("]" + m.group(1) + "]", i)
                end = n if end < 0 else end + len(m.group(1)) + 2
            else:
                end = src.find("\n", i)
                end = n if end < 0 else end
            out.append(re.sub(r"[^\n]", " ", src[i:end]))
            i = end
        elif c in "'\"":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1] if strings else c + re.sub(r"[^\n]", " ", src[i + 1:j]) + c)
            i = j + 1
        elif re.match(r"\[(=*)\[", src[i:]):
            m = re.match(r"\[(=*)\[", src[i:])
            end = src.find("]" + m.group(1) + "]", i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append(src[i:end])
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def header(path):
    """The comment lines a script starts with, without their "--"."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return lines


def all_lua():
    return sorted(SCRIPTS.glob("*.lua"))


def load_scripts():
    return [p for p in all_lua() if not any("Not a load script" in h for h in header(p))]


def weir_counter_vocabulary():
    """Every key weir's stats file can hold (quoted names in stats.c, reasons in parse.c),
    and its config settings (config_file.c: a header may name flows.timeouts.udp)."""
    words = set()
    for f in (REPO / "app" / "weir" / "stats.c", REPO / "lib" / "net" / "parse.c",
              REPO / "app" / "weir" / "config_file.c"):
        words |= set(re.findall(r'"([a-z_][a-z0-9_]*)"', f.read_text()))
    return words


def default_of(path, name):
    """The default a script gives parameter `name` (NAME = NAME or <number>)."""
    m = re.search(r"^%s\s*=\s*%s\s+or\s+([0-9.]+)" % (name, name), path.read_text(), re.M)
    return float(m.group(1))


def expectations(path):
    """`-- expect: NAME A/B` lines of a header: {NAME: Fraction}."""
    out = {}
    for h in header(path):
        m = re.match(r"expect:\s*(\S+)\s+(\d+)/(\d+)\s*$", h)
        if m:
            out[m.group(1)] = Fraction(int(m.group(2)), int(m.group(3)))
    return out


def pktgen_args(path):
    """{pktgen port: pcap file} from a `-- pktgen-args: -s P:FILE ...` header line."""
    for h in header(path):
        if h.startswith("pktgen-args:"):
            return {int(p): f for p, f in re.findall(r"-s\s+(\d+):(\S+)", h)}
    return {}


# ---------------------------------------------------------------------------------------
if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--api":
    print("\n".join(lua_api(Path(sys.argv[2]).read_text())))
    sys.exit(0)

import pytest  # noqa: E402  (the --api mode above runs without pytest)

need_lua = pytest.mark.skipif(LUA is None or LUAC is None,
                              reason="lua5.4/luac5.4 not installed (apt-get install lua5.4)")
need_src = pytest.mark.skipif(not LPKTGENLIB.exists(),
                              reason=f"no Pktgen source at {LPKTGENLIB} (set PKTGEN_SRC)")


def ids(paths):
    return [p.name for p in paths]


def run_stub(tmp_path, script, **params):
    """Run `script` against the stub with the globals `params` defined first; returns the
    list of calls, each [name, args...]."""
    sig = tmp_path / "sig.lua"
    sig.write_text("return " + lua_value(SIGNATURES) + "\n")
    driver = tmp_path / "stub.lua"
    pre = "".join(f"{k} = {lua_value(v)}\n" for k, v in params.items())
    driver.write_text(pre + f"NPORTS = {N_PORTS}\nINFO_VALUES = {lua_value(INFO)}\n" + STUB)
    r = subprocess.run([LUA, str(driver), str(script), str(sig), str(API_FILE)], cwd=str(REPO),
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("DONE"), \
        f"{script.name} failed under the stub:\n{r.stderr}\n{r.stdout[-2000:]}"
    return [json.loads(line[5:]) for line in r.stdout.splitlines() if line.startswith("CALL ")]


def port_set(v):
    if isinstance(v, int):
        return {v}
    if v == "all":
        return set(range(N_PORTS))
    out = set()
    for item in str(v).split(","):
        a, _, b = item.partition("-")
        out |= set(range(int(a), int(b or a) + 1))
    return out


DEFAULTS = {}
OVERRIDES = {"RATE_PCT": 37, "PKT_SIZE": 128, "FLOWS": 4, "DURATION": 2, "TX_PORT": 1,
             "RX_PORT": 0, "PCAP_DIR": "/nonexistent/pcap"}


# ---- the API list ----------------------------------------------------------------------
@need_src
def test_api_list_matches_pktgen_source():
    assert read_api() == lua_api(LPKTGENLIB.read_text()), \
        "pktgen-api.txt differs from lpktgenlib.c: regenerate it with this file's --api mode"


@need_src
def test_stub_signatures_match_pktgen_source():
    ar = lua_arities(LPKTGENLIB.read_text())
    for name, sigs in SIGNATURES.items():
        assert name in ar, name
        if ar[name] is not None:
            assert {len(s) for s in sigs} <= ar[name], (name, ar[name])


def test_stub_signatures_are_api_names():
    assert set(SIGNATURES) <= set(read_api())


# ---- every script ----------------------------------------------------------------------
@need_lua
@pytest.mark.parametrize("script", all_lua(), ids=ids(all_lua()))
def test_parses(script):
    r = subprocess.run([LUAC, "-p", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("script", all_lua(), ids=ids(all_lua()))
def test_uses_only_pktgen_api(script):
    api = set(read_api())
    code = strip_lua_comments(script.read_text(), strings=False)
    assert not re.search(r"\bpktgen\s*\[", code), "pktgen[...]: a name the check cannot see"
    used = set()
    for a, b in re.findall(r"\bpktgen\s*\.\s*([A-Za-z_]\w*)(?:\s*\.\s*([A-Za-z_]\w*))?", code):
        if a in ("range", "info"):
            if b:               # the bare tables themselves are fine
                used.add(f"pktgen.{a}.{b}")
        else:
            used.add(f"pktgen.{a}")
    assert used, "calls no Pktgen function"
    assert used <= api, f"not in Pktgen 23.03's Lua API: {sorted(used - api)}"
    if script in load_scripts():
        assert not used & FORBIDDEN, "quitting and clearing statistics are the runner's job"


# ---- load scripts: the convention ------------------------------------------------------
@pytest.mark.parametrize("script", load_scripts(), ids=ids(load_scripts()))
def test_header_names_real_weir_counters(script):
    h = header(script)
    assert len(h) >= 5 and h[0].startswith(script.name), \
        "a header comment starting with the script's name, saying what it loads"
    text = " ".join(h)
    vocab = weir_counter_vocabulary()
    counters = re.findall(r"\b((?:ports|flows|shaping|postack|mbufs|workers)(?:\[\])?"
                          r"(?:\.[A-Za-z_<>*]+(?:\[\])?)+)", text)
    assert counters, "the header names no weir counter (ports.lan.rx, flows.active, ...)"
    for c in counters:
        parts = [p.replace("[]", "") for p in c.rstrip(".").split(".")]
        skip = False
        for i, p in enumerate(parts):
            if skip or p.startswith("<") or p in ("*", "lan", "wan", "outbound", "inbound"):
                skip = False
                continue
            if i > 0 and parts[i - 1] == "classes":
                continue
            assert p in vocab, f"{c}: weir's stats have no {p!r}"
            skip = p == "classes"


@pytest.mark.parametrize("script", load_scripts(), ids=ids(load_scripts()))
def test_parameters_of_the_convention(script):
    code = strip_lua_comments(script.read_text()).splitlines()
    first_call = next((i for i, line in enumerate(code) if re.search(r"\bpktgen\s*\.", line)), len(code))
    for name in PARAMS:
        at = [i for i, line in enumerate(code)
              if re.match(r"%s\s*=\s*%s\s+or\s+\S" % (name, name), line)]
        assert at, f"no top-level `{name} = {name} or <default>`"
        assert at[0] < first_call, f"{name} is defined after the first Pktgen call"


# ---- load scripts under the stub -------------------------------------------------------
@need_lua
@pytest.mark.parametrize("params", [DEFAULTS, OVERRIDES], ids=["defaults", "overrides"])
@pytest.mark.parametrize("script", load_scripts(), ids=ids(load_scripts()))
def test_runs_under_stub(tmp_path, script, params):
    calls = run_stub(tmp_path, script, **params)
    names = [c[0] for c in calls]
    tx, rx = params.get("TX_PORT", 0), params.get("RX_PORT", 1)
    duration = params.get("DURATION")
    assert not set(names) & FORBIDDEN
    for c in calls:
        if c[0] in SIGNATURES and SIGNATURES[c[0]][0][:1] == ["port"]:
            assert port_set(c[1]) <= {tx, rx}, f"{c}: a port that is neither TX_PORT nor RX_PORT"
    starts = [i for i, c in enumerate(calls) if c[0] == "pktgen.start"]
    stops = [i for i, c in enumerate(calls) if c[0] == "pktgen.stop"]
    assert starts and stops and max(stops) > max(starts), "starts traffic and stops it"
    started = set().union(*(port_set(calls[i][1]) for i in starts))
    stopped = set().union(*(port_set(calls[i][1]) for i in stops))
    assert tx in started and started <= stopped
    waited = sum(c[1] for c in calls[starts[0]:max(stops)] if c[0] == "pktgen.delay") + \
        sum(1000 * c[1] for c in calls[starts[0]:max(stops)] if c[0] == "pktgen.sleep")
    if duration is not None:
        assert duration * 1000 <= waited <= duration * 1000 + 1000, waited
    else:
        assert waited >= 1000
    rates = {p: c[3] for c in calls if c[0] == "pktgen.set" and c[2] == "rate" for p in port_set(c[1])}
    assert tx in rates and math.isclose(rates[tx], params.get("RATE_PCT", default_of(script, "RATE_PCT"))), rates


def range_of(calls, port, field):
    """{what: value} of the last pktgen.range.<field> calls for `port`."""
    out = {}
    for c in calls:
        if c[0] == "pktgen.range." + field and port in port_set(c[1]):
            out[c[2]] = c[3]
    return out


def ip_int(s):
    a, b, c, d = (int(x) for x in s.split("."))
    return a << 24 | b << 16 | c << 8 | d


@need_lua
@pytest.mark.parametrize("flows", [None, 5000, 1], ids=["defaults", "5000", "1"])
@pytest.mark.parametrize("name", ["flows-1m.lua", "flows-1m-churn.lua"])
def test_flows_ranges_cover_every_tuple(tmp_path, name, flows):
    """Source address and port step together: their cycle lengths must be coprime for all
    N_IP x N_PORT pairs to occur, and the pool refills must reach all of them in time."""
    params = {"DURATION": 20} if flows is None else {"DURATION": 20, "FLOWS": flows}
    calls = run_stub(tmp_path, SCRIPTS / name, **params)
    want = flows or 1000000
    ip, port = range_of(calls, 0, "src_ip"), range_of(calls, 0, "src_port")
    n_ip = ip_int(ip["max"]) - ip_int(ip["min"]) + 1
    n_port = port["max"] - port["min"] + 1
    assert ip["inc"] == "0.0.0.1" and port["inc"] == 1
    assert math.gcd(n_ip, n_port) == 1 and n_ip * n_port >= want
    assert n_ip * n_port < want * 1.01 + n_port, "far more tuples than FLOWS"
    assert ip_int(ip["min"]) >> 16 == 10 << 8, "LAN sources in 10.0.0.0/16"
    dst = range_of(calls, 0, "dst_ip")
    assert dst["inc"] == "0.0.0.0" and ip_int(dst["start"]) >> 17 == ip_int("198.18.0.0") >> 17
    assert ["pktgen.set_range", "0", "on"] in calls
    refills = sum(1 for c in calls if c[0] == "pktgen.set" and c[2] == "ttl")
    if name == "flows-1m.lua":  # within its 20 s, every tuple is built at least once
        assert (refills + 1) * POOL >= n_ip * n_port, "the pool refills cannot reach every tuple"
    else:
        windows = [c[3] for c in calls if c[0] == "pktgen.range.src_ip" and c[2] == "min"]
        assert len(set(windows)) >= 19, "the source window moves every second"


def config_rules(cfg):
    """(class, proto, (lo, hi)) of a config's rules that name proto and wan_port only."""
    text = re.sub(r"#.*", "", cfg.read_text())
    rules = []
    for body in re.findall(r"\{([^{}]*class\s*=[^{}]*)\}", text.split("rules", 1)[1]):
        kv = dict(re.findall(r'(\w+)\s*=\s*"?([^";]+)"?\s*;', body))
        assert set(kv) <= {"class", "proto", "wan_port"}, kv
        lo, _, hi = kv["wan_port"].partition("-")
        rules.append((kv["class"], kv["proto"], (int(lo), int(hi or lo))))
    return rules


@need_lua
def test_classes_mix_matches_header_and_config(tmp_path):
    script, cfg = SCRIPTS / "classes.lua", REPO / "conf" / "pktgen-classes.cfg"
    assert cfg.read_text().startswith('@include "pktgen.cfg"')
    calls = run_stub(tmp_path, script)
    seq = [c for c in calls if c[0] == "pktgen.seq"]
    cnt = [c[3] for c in calls if c[0] == "pktgen.set" and c[2] == "seq_cnt"]
    assert cnt and cnt[-1] == len(seq) and sorted(c[1] for c in seq) == list(range(len(seq)))
    assert POOL % len(seq) == 0, "Pktgen's pool must hold whole passes of the sequence"
    assert len({(c[5], c[6], c[7], c[8], c[10]) for c in seq}) == len(seq), "one flow per packet"
    rules = config_rules(cfg)
    got = {}
    for c in seq:
        proto, dport = c[10], c[8]
        cls = next((r[0] for r in rules if r[1] == proto and r[2][0] <= dport <= r[2][1]), "bulk")
        got[cls] = got.get(cls, 0) + 1
    assert {k: Fraction(v, len(seq)) for k, v in got.items()} == expectations(script)


@pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}")
def test_classes_config_is_valid():
    r = subprocess.run([str(WEIR), "--", "--config", str(REPO / "conf" / "pktgen-classes.cfg"),
                        "--check"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr


# ---- make-pcaps and the pcap scripts ---------------------------------------------------
@pytest.fixture(scope="module")
def pcaps(tmp_path_factory):
    pytest.importorskip("scapy", reason="needs scapy: run with Debian's /usr/bin/python3 (python3-scapy)")
    out = tmp_path_factory.mktemp("pcap")
    subprocess.run([sys.executable, str(MAKE_PCAPS), "--out", str(out)], check=True,
                   capture_output=True, timeout=60)
    return out


def frames(path):
    from scapy.utils import RawPcapReader
    return [bytes(d) for d, _meta in RawPcapReader(str(path))]


def test_pcap_scripts_name_files_make_pcaps_writes(pcaps):
    for script in load_scripts():
        args = pktgen_args(script)
        uses_pcap = re.search(r"\bpktgen\s*\.\s*pcap\b", strip_lua_comments(script.read_text()))
        if not uses_pcap:
            continue
        assert args, f"{script.name} replays a pcap but has no `-- pktgen-args: -s P:FILE` line"
        for f in args.values():
            assert (pcaps / f).exists(), f"{script.name}: make-pcaps writes no {f}"


def test_pcap_frames_are_what_pktgen_sends_as_is(pcaps):
    """Pktgen pads frames under 60 bytes with stale buffer bytes and cuts them at 1514."""
    for f in pcaps.glob("*.pcap"):
        sizes = [len(b) for b in frames(f)]
        assert sizes and min(sizes) >= 60 and max(sizes) <= 1514, f.name


def test_malformed_pcap_holds_the_header_mix(pcaps):
    labels = json.loads((pcaps / "malformed.json").read_text())
    n = labels["total"]
    assert n == len(frames(pcaps / "malformed.pcap")) and POOL % n == 0
    got = {"managed": Fraction(labels["managed"], n)}
    got.update({"malformed_by." + r: Fraction(k, n) for r, k in labels["malformed"].items() if k})
    assert got == expectations(SCRIPTS / "malformed.lua")
    assert labels["fragments"] == 0 and labels["non_ip"] == 0


@pytest.mark.skipif(not PARSE_PCAP.exists(), reason=f"parse_pcap not built at {PARSE_PCAP}")
def test_weirs_parser_agrees_with_the_labels(pcaps):
    got = json.loads(subprocess.run([str(PARSE_PCAP), str(pcaps / "malformed.pcap")], check=True,
                                    capture_output=True, text=True).stdout)
    want = json.loads((pcaps / "malformed.json").read_text())
    # Counters the labels do not know of (l2_control: the corpus has no L2 control frame)
    # must read 0; the rest must match the labels.
    assert {k: v for k, v in got.items() if k not in want and v != 0} == {}, got
    # The same for malformed reasons added after the corpus (ipsec_short, ipsec_spi0).
    extra = {k: v for k, v in got.get("malformed", {}).items() if k not in want["malformed"]}
    assert all(v == 0 for v in extra.values()), extra
    got["malformed"] = {k: v for k, v in got["malformed"].items() if k in want["malformed"]}
    assert {k: got.get(k) for k in want} == want
    for f in ("tcp-data.pcap", "tcp-acks.pcap"):
        got = json.loads(subprocess.run([str(PARSE_PCAP), str(pcaps / f)], check=True,
                                        capture_output=True, text=True).stdout)
        assert got["managed"] == got["total"], (f, got)


def tcp_view(path):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    out = []
    for b in frames(path):
        p = Ether(b)
        assert IP in p and TCP in p, p.summary()
        ip, t = p[IP], p[TCP]
        payload = ip.len - ip.ihl * 4 - t.dataofs * 4
        out.append(((ip.src, t.sport, ip.dst, t.dport), str(t.flags), dict(
            (k, v) for k, v in t.options), payload))
    return out


def test_tcp_pcaps_are_data_and_matching_acks(pcaps):
    from ipaddress import ip_address, ip_network
    info = dict(line.split("=", 1) for line in (pcaps / "tcp-bulk-acks.info").read_text().split())
    data, acks = tcp_view(pcaps / "tcp-data.pcap"), tcp_view(pcaps / "tcp-acks.pcap")
    flows = int(info["flows"])
    assert len(data) == int(info["data_frames"]) and len(acks) == int(info["ack_frames"])
    up = {f[0] for f in data}
    assert len(up) == flows
    assert {f[0] for f in acks} == {(d, dp, s, sp) for s, sp, d, dp in up}, "the same 5-tuples reversed"
    for s, _sp, d, _dp in up:
        assert ip_address(s) in ip_network("10.0.0.0/16") and ip_address(d) in ip_network("198.18.0.0/15")
    syns = [f for f in data if f[1] == "S"]
    synacks = [f for f in acks if f[1] == "SA"]
    assert len(syns) == len(synacks) == flows
    for f in syns + synacks:    # weir learns scale and MSS from both (lib/worker/worker.c ack_wscale)
        assert "WScale" in f[2] and "MSS" in f[2] and "SAckOK" in f[2] and "Timestamp" in f[2]
    pure = [f for f in acks if f[1] == "A"]
    assert len(pure) + len(synacks) == len(acks)
    assert all(f[3] == 0 and "Timestamp" in f[2] for f in pure), "pure ACKs with timestamps"
    assert sum("SAck" in f[2] for f in pure) == len(pure) // 2
    segs = [f for f in data if f[3] > 0]
    assert len(segs) == flows * int(info["rounds"]) and len(pure) * 2 == len(segs)
    assert {len(b) for b, f in zip(frames(pcaps / "tcp-data.pcap"), data) if f[3] > 0} == \
        {int(info["size"]) - 4}


@need_lua
def test_tcp_bulk_acks_sends_one_pass_of_acks_per_pass_of_data(tmp_path, pcaps):
    """The ACK port's rate, from the script's own arithmetic, against the pcaps' real sizes:
    Pktgen paces a pcap port by its average frame plus 24 bytes."""
    info = dict(line.split("=", 1) for line in (pcaps / "tcp-bulk-acks.info").read_text().split())
    calls = run_stub(tmp_path, SCRIPTS / "tcp-bulk-acks.lua", PCAP_DIR=str(pcaps), RATE_PCT=50)
    rates = {int(c[1]): c[3] for c in calls if c[0] == "pktgen.set" and c[2] == "rate"}
    data_avg, ack_avg = float(info["data_avg"]), float(info["ack_avg"])
    want = 50 * (ack_avg + 24) / (data_avg + 24) * int(info["ack_frames"]) / int(info["data_frames"])
    assert rates[0] == 50 and math.isclose(rates[1], want, rel_tol=1e-3), (rates, want)
    # Pktgen 23.03 paces every port of an lcore by the first one's tick: the bursts carry
    # the ratio, and the two rates must give the same tick (burst / packets a second).
    burst = {int(c[1]): c[3] for c in calls if c[0] == "pktgen.set" and c[2] == "burst"}
    ratio = Fraction(int(info["ack_frames"]), int(info["data_frames"]))
    assert Fraction(burst[1], burst[0]) == ratio
    pps = {p: rates[p] / (float(info[k]) + 24) for p, k in ((0, "data_avg"), (1, "ack_avg"))}
    assert math.isclose(burst[0] / pps[0], burst[1] / pps[1], rel_tol=1e-3)
    assert ["pktgen.pcap", "0", "on"] in calls and ["pktgen.pcap", "1", "on"] in calls


# ---- the runner's zero-loss search (pktgen-scripts/run --zero-loss), without Pktgen -----
def runner_module():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("pktgen_run", str(SCRIPTS / "run"))
    spec = importlib.util.spec_from_loader("pktgen_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def runner():
    return runner_module()


@pytest.mark.parametrize("limit", [0.3, 3.3, 5.0, 7.77, 9.99])
def test_bisection_finds_the_limit_within_one_step(runner, limit):
    tried = []

    def trial(rate):
        tried.append(rate)
        return rate <= limit, {"rate": rate}
    best, tries = runner.bisect_zero_loss(trial, 0, 10, 7)
    assert best is not None and best <= limit < best + 10 / 2 ** 7
    assert tried[0] == 10, "HIGH is tried first"
    assert len({r for r in tried}) == 1 + 7
    fails = [r for r in tried if r > limit]
    assert len(fails) == 2 * len(set(fails)), "every failing rate is tried twice, no more"
    assert [(r, ok, i["rate"]) for r, ok, i in tries] == [(r, r <= limit, r) for r in tried]


def test_bisection_when_high_passes_or_nothing_does(runner):
    best, tries = runner.bisect_zero_loss(lambda r: (True, None), 2, 30, 7)
    assert best == 30 and len(tries) == 1
    best, tries = runner.bisect_zero_loss(lambda r: (False, None), 2, 30, 5)
    assert best is None and len(tries) == 2 * (1 + 5)
    assert min(r for r, _, _ in tries) == 2 + 28 / 2 ** 5, "LOW itself is never tried"


def test_bisection_retries_a_failing_trial_once(runner):
    """A noisy trial fails the first try of every rate: the retry carries the search."""
    seen = set()

    def trial(rate):
        first = rate not in seen
        seen.add(rate)
        return (not first and rate <= 4.0), None
    best, tries = runner.bisect_zero_loss(trial, 0, 8, 4)
    assert best == 4.0                          # 8 fails; 4 passes on its retry; 6, 5, 4.5 fail
    assert [r for r, _, _ in tries] == [8, 8, 4, 4, 6, 6, 5, 5, 4.5, 4.5]
    seen.clear()
    best, _ = runner.bisect_zero_loss(trial, 0, 8, 4, retries=0)
    assert best is None, "without the retry no rate passes"


def summary(**kw):
    s = {"tx_pkts": 10_000_000, "tx_bytes": 600_000_000, "rx_pkts": 10_000_000,
         "offered_mpps": 2.0, "lost_pkts": 0, "loss_pct": 0.0, "fwd_reasons": {},
         "link_mbps": 100000}
    s.update(kw)
    return s


def test_zero_loss_verdict(runner):
    assert math.isclose(runner.asked_mpps(100, 100000, 64), 100e3 / (84 * 8))
    rate = 2.0 / runner.asked_mpps(1, 100000, 64)      # the rate that asks 2 Mpps of 64 B
    assert runner.zero_loss_verdict(summary(), rate, 0.001) == (True, [])
    # Pktgen held back by the forwarder (memif pushes back instead of dropping)
    ok, why = runner.zero_loss_verdict(summary(offered_mpps=1.9), rate, 0.001)
    assert not ok and "asked" in why[0]
    assert runner.zero_loss_verdict(summary(offered_mpps=1.97), rate, 0.001)[0]
    # loss above the allowance (0.001 % of 10 M frames: 100), Pktgen's or the forwarder's
    assert runner.zero_loss_verdict(summary(lost_pkts=100, loss_pct=0.001), rate, 0.001)[0]
    assert not runner.zero_loss_verdict(summary(lost_pkts=101, loss_pct=0.00101), rate, 0.001)[0]
    assert runner.zero_loss_verdict(summary(fwd_reasons={"lan.tx_full": 99}), rate, 0.001)[0]
    ok, why = runner.zero_loss_verdict(summary(fwd_reasons={"lan.tx_full": 101}), rate, 0.001)
    assert not ok and "lan.tx_full 101" in why[0]
    assert not runner.zero_loss_verdict(summary(fwd_reasons={"lan.tx_full": 1}), rate, 0)[0]
    assert not runner.zero_loss_verdict(summary(lost_pkts=1, loss_pct=1e-5), rate, 0)[0]
    assert not runner.zero_loss_verdict(
        summary(fwd_reasons={"wan.tx_dropped(lan rx - wan tx)": 200}), rate, 0.001)[0]
    assert runner.zero_loss_verdict(
        summary(fwd_reasons={"wan.tx_dropped(lan rx - wan tx)": 200}), rate, 0.1)[0]
    # frames weir counts but forwards are no loss
    assert runner.zero_loss_verdict(
        summary(fwd_reasons={"lan.flow_full": 9, "lan.malformed_by.ip_len": 2}), rate, 0.001)[0]
    assert not runner.zero_loss_verdict(summary(tx_pkts=0), rate, 0.001)[0]


def test_summary_reads_the_link_speed(runner):
    port = {"opackets": 100, "obytes": 6000, "ipackets": 100, "ibytes": 6000}
    res = {"pktgen": {"params": {"TX_PORT": 0, "RX_PORT": 1}, "traffic_s": 1.0,
                      "links": {"0": "<UP-100000-FD>", "1": "<UP-100000-FD>"},
                      "ports": {"0": {"port": port, "pkt": {}}, "1": {"port": port, "pkt": {}}}}}
    runner.summarize(res, None)
    assert res["summary"]["link_mbps"] == 100000 and res["summary"]["loss_pct"] == 0


def test_zero_loss_arguments(runner):
    ap = runner.arg_parser()
    a = ap.parse_args(["--zero-loss", "--zl-range", "1", "9.5", "--fwd", "testpmd-io", "64B"])
    runner.check_args(ap, a)
    assert a.zero_loss and a.zl_range == [1.0, 9.5] and a.zl_steps == 7 and a.zl_loss == 0.001
    a = ap.parse_args(["--zero-loss", "imix"])
    runner.check_args(ap, a)
    assert a.zl_range == [0.0, 100.0] and a.script == ["imix"] and a.rate is None
    for bad in (["--zero-loss", "--zl-range", "5", "5", "64B"],
                ["--zero-loss", "--zl-range", "1", "101", "64B"],
                ["--zero-loss", "--rate", "5", "64B"],
                ["--zero-loss", "--zl-steps", "0", "64B"],
                ["--zero-loss", "64B", "imix"],
                ["--zero-loss", "--bench", "64B"]):
        with pytest.raises(SystemExit):
            runner.check_args(ap, ap.parse_args(bad))

// SPDX-License-Identifier: BSD-3-Clause
// weir's dashboard: polls the REST API of the weir that served it and keeps
// the history it shows itself (from when the page was opened). Plain DOM and
// SVG, no library. Every value from the API reaches the page as text
// (textContent), never as markup.
//
// Panels for what a weir may or may not have are feature-detected: the
// served OpenAPI document lists its endpoints, a 404 hides a panel, and the
// RTT and retransmission columns appear when flows or hosts carry numeric
// fields whose names say rtt or retrans.
"use strict";
(function () {
  const POLL_MS = 1000;          // status and counters: link and class rates
  const FLOWS_EVERY = 2;         // flows, hosts, subscribers: every 2 polls
  const TREE_EVERY = 5;          // class tree and policy: every 5 polls
  const HISTORY_S = 300;         // what the charts keep
  const TOP = 10;
  const FLOW_LIMIT = 500;        // one page of the flow list
  const TOKEN_KEY = "weir.token";
  const COLOURS = ["#2f6fd6", "#d6542f", "#2a9d55", "#9b59b6", "#c9a227", "#17a2b8",
                   "#e83e8c", "#6c757d", "#8b4513", "#20c997"];
  // Field names of TCP measurement: round trips in ms, retransmissions; sample
  // counts are not figures to rank by.
  const RTT_RE = /rtt(?!.*(samples|count))/i;
  const RETX_RE = /(retr|retx)(?!.*(samples|count))/i;
  const MAX_TCP_COLS = 6;

  const st = {
    polls: 0, prev: null, counters: null, status: null, tree: null, policy: null,
    features: { hosts: null, subscribers: null, subPatch: null },
    link: { out: [], in: [] }, queue: { outbound: [], inbound: [] }, drops: [], cls: {}, subs: {},
    flowPrev: null, flows: [], hostPrev: null, hosts: [], subPrev: null, subList: [],
    timer: null, busy: false, lastError: "",
  };
  window.weirDash = st;          // for the browser test and the curious

  const $ = (id) => document.getElementById(id);

  // ---- the API ----

  class ApiError extends Error {
    constructor(status, msg) { super(msg); this.status = status; }
  }

  async function api(method, path, body) {
    const headers = { "Accept": "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers["Authorization"] = "Bearer " + token;
    const opts = { method, headers, cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const r = await fetch(path, opts);
    let j = null;
    try { j = await r.json(); } catch (e) { j = null; }
    if (r.status === 401) {
      askToken(sessionStorage.getItem(TOKEN_KEY) ? "that token was refused" : "");
      throw new ApiError(401, "the management token is needed");
    }
    return { status: r.status, body: j };
  }

  function errText(res) {
    const e = res.body && res.body.error;
    return e ? `${e.code} ${e.message}` : `HTTP ${res.status}`;
  }

  async function getOk(path) {
    const res = await api("GET", path);
    if (res.status !== 200) throw new ApiError(res.status, `${path}: ${errText(res)}`);
    return res.body;
  }

  // ---- the token: asked once, kept for this tab, never in a URL ----

  function askToken(msg) {
    $("token-form").hidden = false;
    $("token-msg").textContent = msg || "";
    $("hdr-state").textContent = "token needed";
  }

  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("token-input").value.trim();
    if (!t) return;
    sessionStorage.setItem(TOKEN_KEY, t);
    $("token-input").value = "";
    $("token-form").hidden = true;
    restart();
  });

  // ---- formatting ----

  function fmtBps(v) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    const u = [["G", 1e9], ["M", 1e6], ["k", 1e3]];
    for (const [p, m] of u) if (Math.abs(v) >= m) return (v / m).toFixed(v / m >= 100 ? 0 : 1) + ` ${p}bit/s`;
    return v.toFixed(0) + " bit/s";
  }
  function fmtNum(v) {
    if (v === null || v === undefined) return "-";
    if (typeof v !== "number") return String(v);
    return Number.isInteger(v) ? v.toLocaleString("en") : v.toFixed(v < 10 ? 2 : 1);
  }
  function fmtRate(bps) {            // a configured rate, as weirctl prints it
    if (!bps) return "-";
    for (const [p, m] of [["G", 1e9], ["M", 1e6], ["k", 1e3]])
      if (bps >= m && bps % (m / 10) === 0) return (bps / m) + p + "bit";
    return bps + "bit";
  }
  function fmtUptime(s) {
    s = Math.floor(s);
    const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
    return (d ? d + "d " : "") + (d || h ? h + "h " : "") + m + "m " + (s % 60) + "s";
  }

  // ---- DOM helpers ----

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  // cols: [{h, f(row) -> text, cls, attrs(row) -> {..}}]
  function fillTable(table, cols, rows, empty) {
    table.replaceChildren();
    const thead = el("thead"), tr = el("tr");
    for (const c of cols) tr.appendChild(el("th", { class: c.cls }, c.h));
    thead.appendChild(tr);
    table.appendChild(thead);
    const tb = el("tbody");
    for (const r of rows) {
      const row = el("tr", r.__attrs);
      for (const c of cols) {
        const td = el("td", Object.assign({ class: c.cls }, c.attrs ? c.attrs(r) : {}));
        const v = c.f(r);
        if (v instanceof Node) td.appendChild(v); else td.textContent = v;
        row.appendChild(td);
      }
      tb.appendChild(row);
    }
    if (!rows.length && empty) {
      const row = el("tr");
      row.appendChild(el("td", { colspan: cols.length, class: "muted" }, empty));
      tb.appendChild(row);
    }
    table.appendChild(tb);
  }

  // ---- charts: SVG lines over the last HISTORY_S seconds ----

  const SVGNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  function drawChart(box, series, fmt) {
    const W = 640, H = 170, L = 70, R = 8, T = 8, B = 20;
    const now = performance.now() / 1000;
    let max = 0;
    for (const s of series) for (const p of s.pts) if (p[1] > max) max = p[1];
    max = niceMax(max);
    const x = (t) => L + (W - L - R) * (1 - (now - t) / HISTORY_S);
    const y = (v) => T + (H - T - B) * (1 - v / max);
    const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "plot", role: "img" });
    for (let i = 0; i <= 4; i++) {
      const v = max * i / 4;
      g.appendChild(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
      const t = svg("text", { x: L - 6, y: y(v) + 4, class: "axis", "text-anchor": "end" });
      t.textContent = fmt(v);
      g.appendChild(t);
    }
    for (const [sec, label] of [[HISTORY_S, "-5 min"], [HISTORY_S / 2, "-2.5 min"], [0, "now"]]) {
      const t = svg("text", { x: x(now - sec), y: H - 4, class: "axis",
                              "text-anchor": sec === 0 ? "end" : sec === HISTORY_S ? "start" : "middle" });
      t.textContent = label;
      g.appendChild(t);
    }
    series.forEach((s) => {
      const pts = s.pts.filter((p) => now - p[0] <= HISTORY_S);
      if (pts.length < 2) return;
      g.appendChild(svg("polyline", { points: pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" "),
                                      stroke: s.colour, class: "line" }));
    });
    const legend = el("div", { class: "legend" });
    series.forEach((s) => {
      const last = s.pts.length ? s.pts[s.pts.length - 1][1] : null;
      const item = el("span", { class: "item" });
      const sw = el("span", { class: "swatch" });
      sw.style.background = s.colour;     // CSSOM: the page's CSP allows no style attributes
      item.appendChild(sw);
      item.appendChild(document.createTextNode(`${s.name} ${fmt(last)}`));
      legend.appendChild(item);
    });
    box.replaceChildren(g, legend);
  }

  function pushPt(arr, t, v) {
    arr.push([t, v]);
    while (arr.length && t - arr[0][0] > HISTORY_S + 5) arr.shift();
  }

  // ---- rates from two samples of a counter ----

  // bytes per second between two samples, null when the counter went back
  // (a counters reset, a class tree rebuilt by a rate change).
  function rate(b1, b0, dt) {
    if (typeof b1 !== "number" || typeof b0 !== "number" || !(dt > 0) || b1 < b0) return null;
    return (b1 - b0) * 8 / dt;
  }

  // Numeric leaves of an object as dotted keys, a few levels deep.
  function flat(o, pre, out, depth) {
    out = out || {};
    if (depth > 3 || o === null || typeof o !== "object" || Array.isArray(o)) return out;
    for (const k in o) {
      const v = o[k], key = pre ? pre + "." + k : k;
      if (typeof v === "number") out[key] = v;
      else if (v && typeof v === "object" && !Array.isArray(v)) flat(v, key, out, (depth || 0) + 1);
    }
    return out;
  }

  // ---- the link and the classes (every poll) ----

  function onCounters(c, s, t) {
    const p = st.prev;
    st.counters = c;
    st.status = s;
    const ports = c.ports || {};
    $("hdr-version").textContent = `version ${s.version}`;
    $("hdr-uptime").textContent = `up ${fmtUptime(s.uptime_s)}`;
    $("hdr-policy").textContent = `policy ${s.policy.epoch} (${s.policy.source})`;
    const drops = ["lan", "wan"].reduce((a, r) => a + ((s.ports[r] || {}).dropped || 0), 0);
    $("link-drops").textContent = fmtNum(drops);
    $("link-flows").textContent = `${fmtNum(s.flows.active)} / ${fmtNum(s.flows.capacity)}`;
    $("link-mbufs").textContent = `${fmtNum(s.mbufs.in_use)} / ${fmtNum(s.mbufs.total)}`;
    st.prev = { c, uptime: c.uptime_s };
    if (!p) return;
    const dt = c.uptime_s - p.uptime;
    const pp = p.c.ports || {};
    // Outbound is what weir sends on its WAN port, inbound on its LAN port.
    const out = rate((ports.wan || {}).tx_bytes, (pp.wan || {}).tx_bytes, dt);
    const inb = rate((ports.lan || {}).tx_bytes, (pp.lan || {}).tx_bytes, dt);
    for (const [id, v] of [["link-out", out], ["link-in", inb]]) {
      $(id).textContent = fmtBps(v);
      $(id).dataset.bps = v === null ? "" : v.toFixed(0);
    }
    if (st.firstRatesAt === undefined && out !== null) st.firstRatesAt = performance.now();
    if (out !== null) pushPt(st.link.out, t, out);
    if (inb !== null) pushPt(st.link.in, t, inb);
    // Queues now (packets held by the class trees) and frames dropped a second.
    for (const dir of ["outbound", "inbound"]) {
      const q = ((c.shaping || {})[dir] || {}).queued_pkts;
      if (typeof q === "number") pushPt(st.queue[dir], t, q);
    }
    const dropped = (ps) => ["lan", "wan"].reduce((a, r) => a + ["dropped", "tx_full", "refused"]
      .reduce((b, k) => b + (((ps || {})[r] || {})[k] || 0), 0), 0);
    const dr = rate(dropped(ports), dropped(pp), dt);
    if (dr !== null) pushPt(st.drops, t, dr / 8);
    for (const dir of ["outbound", "inbound"]) {
      const now = ((c.shaping || {})[dir] || {}).classes || {};
      const then = ((p.c.shaping || {})[dir] || {}).classes || {};
      for (const name in now) {
        const key = dir + "/" + name;
        const v = rate(now[name].bytes, (then[name] || {}).bytes, dt);
        st.cls[key] = st.cls[key] || { pts: [], now: null };
        st.cls[key].now = v;
        if (v !== null) pushPt(st.cls[key].pts, t, v);
      }
    }
  }

  function drawLink() {
    drawChart($("chart-link"), [
      { name: "outbound", colour: COLOURS[0], pts: st.link.out },
      { name: "inbound", colour: COLOURS[1], pts: st.link.in },
    ], fmtBps);
    drawChart($("chart-queues"), [
      { name: "queued outbound (pkts)", colour: COLOURS[0], pts: st.queue.outbound },
      { name: "queued inbound (pkts)", colour: COLOURS[1], pts: st.queue.inbound },
      { name: "dropped (frames/s)", colour: COLOURS[3], pts: st.drops },
    ], (v) => fmtNum(v === null || v === undefined ? v : Math.round(v)));
  }

  function classRows(tree, dir) {
    // Depth-first from the roots, children under their parent.
    const kids = {};
    for (const k of tree.classes) (kids[k.parent || ""] = kids[k.parent || ""] || []).push(k);
    const out = [];
    const walk = (parent, depth) => {
      for (const k of kids[parent] || []) {
        out.push(Object.assign({ depth, dir }, k));
        walk(k.name, depth + 1);
      }
    };
    walk("", 0);
    return out;
  }

  function classCounters(dir, name) {
    return ((((st.counters || {}).shaping || {})[dir] || {}).classes || {})[name] || {};
  }

  function rateForm(row) {
    const f = el("form", { class: "setrate" });
    const inp = el("input", { class: "rate", size: 9, placeholder: fmtRate(row.rate_bps),
                              "aria-label": `new rate of ${row.dir} ${row.name}` });
    const b = el("button", { type: "submit", class: "set" }, "set");
    if (st.policy && st.policy.source === "script") {
      inp.disabled = b.disabled = true;
      inp.title = "the policy comes from a script: change the script";
    }
    f.append(inp, b);
    f.addEventListener("submit", (ev) => {
      ev.preventDefault();
      setClassRate(row.dir, row.name, inp.value.trim());
    });
    return f;
  }

  async function setClassRate(dir, name, value) {
    const msg = $("class-msg");
    if (!value) return;
    const body = { rate: /^\d+$/.test(value) ? Number(value) : value };
    msg.dataset.status = "pending";
    msg.textContent = `setting ${dir} ${name} to ${value} ...`;
    try {
      const res = await api("PATCH", `/api/v1/classes/${encodeURIComponent(dir)}/${encodeURIComponent(name)}`, body);
      msg.dataset.status = String(res.status);
      if (res.status === 200) {
        msg.className = "ok";
        msg.textContent = `${dir} ${name}: rate ${fmtRate(res.body.class.rate_bps)}, ceil ` +
          `${fmtRate(res.body.class.ceil_bps)}; policy ${res.body.epoch} in force (class counters start over)`;
        st.tree = null;
        await slowTree();
      } else {
        msg.className = "err";
        msg.textContent = `${dir} ${name}: ${errText(res)}`;
      }
    } catch (e) {
      msg.dataset.status = "error";
      msg.className = "err";
      msg.textContent = `${dir} ${name}: ${e.message}`;
    }
  }

  function drawClasses() {
    const box = $("classes-dirs");
    const tree = st.tree;
    if (!tree) return;
    const dirs = ["outbound", "inbound"].filter((d) => tree[d]);
    $("classes-none").hidden = dirs.length > 0;
    for (const dir of dirs) {
      let sec = document.getElementById("cls-" + dir);
      if (!sec) {
        sec = el("div", { id: "cls-" + dir, class: "dir" });
        sec.append(el("h3", {}, dir), el("div", { class: "chart" }), el("table", { class: "classes" }));
        box.appendChild(sec);
      }
      const rows = classRows(tree[dir], dir);
      const leaves = rows.filter((r) => r.leaf);
      drawChart(sec.querySelector(".chart"), leaves.map((r, i) => ({
        name: r.name, colour: COLOURS[i % COLOURS.length],
        pts: (st.cls[dir + "/" + r.name] || { pts: [] }).pts,
      })), fmtBps);
      for (const r of rows) r.__attrs = { "data-key": dir + "/" + r.name };
      fillTable(sec.querySelector("table"), [
        { h: "class", f: (r) => "\u2003".repeat(r.depth) + r.name, cls: "name" },
        { h: "mode", f: (r) => r.mode || "" },
        { h: "rate", f: (r) => fmtRate(r.rate_bps), cls: "num cfg-rate" },
        { h: "ceil", f: (r) => fmtRate(r.ceil_bps), cls: "num" },
        { h: "prio", f: (r) => fmtNum(r.prio), cls: "num" },
        { h: "now", f: (r) => fmtBps((st.cls[dir + "/" + r.name] || {}).now), cls: "num now",
          attrs: (r) => { const v = (st.cls[dir + "/" + r.name] || {}).now;
                          return { "data-bps": v === null || v === undefined ? "" : v.toFixed(0) }; } },
        { h: "queue pkts", f: (r) => fmtNum(classCounters(dir, r.name).queued_pkts), cls: "num" },
        { h: "drops", f: (r) => { const k = classCounters(dir, r.name);
                                  return fmtNum((k.drops_flow || 0) + (k.drops_class || 0)); }, cls: "num" },
        { h: "flows", f: (r) => fmtNum(classCounters(dir, r.name).flows), cls: "num" },
        { h: "new rate", f: rateForm },
      ], rows);
    }
  }

  // ---- flows, hosts, subscribers (every FLOWS_EVERY polls) ----

  function flowKey(f) {
    return `${f.worker}/${f.slot}/${f.proto}/${f.lan.addr}/${f.lan.port}/${f.wan.addr}/${f.wan.port}`;
  }

  async function slowFlows() {
    const t = performance.now() / 1000;
    const fl = await getOk(`/api/v1/flows?limit=${FLOW_LIMIT}`);
    const prev = st.flowPrev;
    const rows = [];
    const seen = new Map();
    for (const f of fl.flows) {
      const k = flowKey(f);
      const bo = f.out.bytes, bi = f.in.bytes;
      seen.set(k, { bo, bi });
      const p = prev && prev.map.get(k);
      const dt = prev ? t - prev.t : 0;
      const ro = p ? rate(bo, p.bo, dt) : null, ri = p ? rate(bi, p.bi, dt) : null;
      rows.push({ f, k, out: ro, in: ri, total: (ro || 0) + (ri || 0), m: flat(f) });
    }
    st.flowPrev = { t, map: seen };
    st.flows = rows;
    st.flowTotal = fl.total;
    $("flows-src").textContent = fl.total > fl.flows.length
      ? `(of the first ${fl.flows.length} of ${fl.total} flows)` : `(${fl.total} flows)`;
  }

  // The order in which fields are worth a column: round trips in ms before
  // their minima and smoothed forms, retransmitted segments before bytes.
  function tcpRank(k) {
    return (RTT_RE.test(k) ? 0 : 10) + (/min|srtt/.test(k) ? 2 : 0) + (/_ms$/.test(k) ? 0 : 1) +
           (/segs|ratio/.test(k) ? 0 : 1);
  }

  function tcpCols(rows) {
    // The RTT and retransmission fields this weir reports, by name.
    const keys = new Set();
    for (const r of rows) for (const k in r.m) if (RTT_RE.test(k) || RETX_RE.test(k)) keys.add(k);
    return [...keys].sort((a, b) => tcpRank(a) - tcpRank(b) || a.localeCompare(b))
      .slice(0, MAX_TCP_COLS).map((k) => ({ h: k, f: (r) => fmtNum(r.m[k]), cls: "num" }));
  }

  function drawFlows() {
    const rows = st.flows.slice().sort((a, b) => b.total - a.total).slice(0, TOP);
    fillTable($("flows-table"), [
      { h: "proto", f: (r) => r.f.proto },
      { h: "LAN", f: (r) => `${r.f.lan.addr}:${r.f.lan.port}` },
      { h: "WAN", f: (r) => `${r.f.wan.addr}:${r.f.wan.port}` },
      { h: "class", f: (r) => r.f.out.class || r.f.in.class || "" },
      { h: "state", f: (r) => r.f.state },
      { h: "out", f: (r) => fmtBps(r.out), cls: "num" },
      { h: "in", f: (r) => fmtBps(r.in), cls: "num" },
    ].concat(tcpCols(rows)), rows, "no flows");
  }

  async function slowHosts() {
    if (st.features.hosts === false) return;
    const t = performance.now() / 1000;
    let res;
    try { res = await api("GET", "/api/v1/hosts"); } catch (e) { throw e; }
    if (res.status === 404) { st.features.hosts = false; return; }
    if (res.status !== 200) throw new ApiError(res.status, `/api/v1/hosts: ${errText(res)}`);
    st.features.hosts = true;
    const list = listOf(res.body);
    const prev = st.hostPrev;
    const map = new Map();
    st.hosts = list.map((h) => {
      const k = idOf(h);
      const m = flat(h);
      const bytes = sumBytes(m);
      map.set(k, bytes);
      return { k, m, h, total: entryRate(bytes, prev && prev.map.get(k), prev ? t - prev.t : 0, m) };
    });
    st.hostPrev = { t, map };
  }

  // The first array of a list reply, or the reply if it is one.
  function listOf(b) {
    if (Array.isArray(b)) return b;
    for (const k in b || {}) if (Array.isArray(b[k])) return b[k];
    return [];
  }
  function idOf(o) {
    for (const k of ["name", "id", "addr", "host", "ip", "subscriber"]) {
      const v = o[k];
      if (typeof v === "string" || typeof v === "number") return String(v);
      if (v && typeof v === "object" && v.addr) return String(v.addr);
    }
    return JSON.stringify(o).slice(0, 60);
  }
  // Bytes carried, both ways: bytes, bytes_in/bytes_out, in.bytes/out.bytes
  // (not queued or retransmitted bytes).
  function sumBytes(m) {
    let s = null;
    for (const k in m) if (/(^|\.)bytes(_in|_out)?$/.test(k) && !/queue|retr|retx/.test(k)) s = (s || 0) + m[k];
    return s;
  }
  // A measured rate in the entry itself, for entries without byte counters
  // (rate_bps and ceil_bps are configured rates in weir's API, not measured).
  function rateOf(m) {
    let s = null;
    for (const k in m)
      if (/bps/.test(k) && !/(^|\.)(rate|ceil)_bps$|ceil|limit|max|min|guarant|cfg|conf/.test(k)) s = (s || 0) + m[k];
    return s;
  }

  // bit/s of an entry between two polls: from its byte counters when it has
  // them (none at the first poll), else from a measured rate it carries.
  function entryRate(bytes, prevBytes, dt, m) {
    if (bytes === null) return rateOf(m);
    return prevBytes === undefined || prevBytes === null ? null : rate(bytes, prevBytes, dt);
  }

  function drawHosts() {
    let rows;
    if (st.features.hosts) {
      $("hosts-src").textContent = "(from /api/v1/hosts)";
      rows = st.hosts.slice();
    } else {
      // Without /api/v1/hosts: the listed flows summed by LAN address.
      $("hosts-src").textContent = "(LAN addresses of the listed flows)";
      const by = new Map();
      for (const r of st.flows) {
        const a = r.f.lan.addr;
        const h = by.get(a) || { k: a, total: 0, flows: 0, m: {} };
        h.total += r.total;
        h.flows++;
        for (const k in r.m) if (RTT_RE.test(k)) h.m[k] = Math.max(h.m[k] || 0, r.m[k]);
        by.set(a, h);
      }
      rows = [...by.values()];
    }
    rows.sort((a, b) => (b.total || 0) - (a.total || 0));
    rows = rows.slice(0, TOP);
    const cols = [{ h: "host", f: (r) => r.k }, { h: "rate", f: (r) => fmtBps(r.total), cls: "num" }];
    if (!st.features.hosts) cols.push({ h: "flows", f: (r) => fmtNum(r.flows), cls: "num" });
    fillTable($("hosts-table"), cols.concat(tcpCols(rows)), rows, "no hosts");
  }

  async function slowSubscribers() {
    if (st.features.subscribers === false) return;
    const t = performance.now() / 1000;
    const res = await api("GET", "/api/v1/subscribers");
    if (res.status === 404) { st.features.subscribers = false; $("subscribers").hidden = true; return; }
    if (res.status !== 200) throw new ApiError(res.status, `/api/v1/subscribers: ${errText(res)}`);
    st.features.subscribers = true;
    $("subscribers").hidden = false;
    const prev = st.subPrev;
    const map = new Map();
    st.subList = listOf(res.body).map((s) => {
      const k = idOf(s), m = flat(s), bytes = sumBytes(m);
      map.set(k, bytes);
      const v = entryRate(bytes, prev && prev.map.get(k), prev ? t - prev.t : 0, m);
      st.subs[k] = st.subs[k] || [];
      if (v !== null) pushPt(st.subs[k], t, v);
      // The path names a subscriber by its id where it has one, its name otherwise.
      const pid = s.id !== undefined && s.id !== null ? String(s.id) : k;
      return { k, pid, m, s, total: v };
    });
    st.subPrev = { t, map };
  }

  function subRateForm(r) {
    if (!st.features.subPatch) return "";
    const f = el("form", { class: "setrate" });
    const inp = el("input", { class: "rate", size: 9, "aria-label": `new rate of ${r.k}` });
    f.append(inp, el("button", { type: "submit", class: "set" }, "set"));
    f.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const v = inp.value.trim();
      if (!v) return;
      const path = st.features.subPatch.replace(/\{[^}]+\}/, encodeURIComponent(r.pid));
      const msg = $("class-msg");
      try {
        const res = await api("PATCH", path, { rate: /^\d+$/.test(v) ? Number(v) : v });
        msg.dataset.status = String(res.status);
        msg.className = res.status === 200 ? "ok" : "err";
        msg.textContent = res.status === 200 ? `subscriber ${r.k}: rate set to ${v}` : `subscriber ${r.k}: ${errText(res)}`;
      } catch (e) {
        msg.className = "err";
        msg.textContent = `subscriber ${r.k}: ${e.message}`;
      }
    });
    return f;
  }

  function drawSubscribers() {
    if (!st.features.subscribers) return;
    const rows = st.subList.slice().sort((a, b) => (b.total || 0) - (a.total || 0));
    drawChart($("chart-subs"), rows.slice(0, COLOURS.length).map((r, i) => ({
      name: r.k, colour: COLOURS[i], pts: st.subs[r.k] || [] })), fmtBps);
    const extra = new Set();
    for (const r of rows) for (const k in r.m) if (/rate|ceil|queue|drop/.test(k)) extra.add(k);
    fillTable($("subs-table"), [
      { h: "subscriber", f: (r) => r.k },
      { h: "now", f: (r) => fmtBps(r.total), cls: "num" },
    ].concat([...extra].sort().map((k) => ({ h: k, f: (r) => fmtNum(r.m[k]), cls: "num" })))
      .concat(tcpCols(rows)).concat([{ h: "new rate", f: subRateForm }]), rows.slice(0, 50), "no subscribers");
  }

  function drawTcp() {
    const src = st.features.hosts ? st.hosts : [];
    const all = st.flows.concat(src.map((h) => ({ f: null, k: h.k, m: h.m })));
    const worst = (re) => {
      const out = [];
      for (const r of all) {
        // The row's most telling field of the kind (tcpRank), the largest of those.
        let best = null, key = null;
        for (const k in r.m) {
          if (!re.test(k)) continue;
          if (best === null || tcpRank(k) < tcpRank(key) || (tcpRank(k) === tcpRank(key) && r.m[k] > best)) {
            best = r.m[k];
            key = k;
          }
        }
        if (best !== null) out.push({ r, v: best, key });
      }
      return out.sort((a, b) => b.v - a.v).slice(0, TOP);
    };
    const rtt = worst(RTT_RE), retx = worst(RETX_RE);
    $("tcp").hidden = !rtt.length && !retx.length;
    const name = (x) => x.r.f ? `${x.r.f.lan.addr}:${x.r.f.lan.port} \u2194 ${x.r.f.wan.addr}:${x.r.f.wan.port}` : `host ${x.r.k}`;
    fillTable($("rtt-table"), [{ h: "flow or host", f: name }, { h: "field", f: (x) => x.key },
                               { h: "value", f: (x) => fmtNum(x.v), cls: "num" }], rtt, "none reported");
    fillTable($("retx-table"), [{ h: "flow or host", f: name }, { h: "field", f: (x) => x.key },
                                { h: "value", f: (x) => fmtNum(x.v), cls: "num" }], retx, "none reported");
  }

  // ---- the class tree and the policy (every TREE_EVERY polls) ----

  async function slowTree() {
    const [tree, pol] = await Promise.all([getOk("/api/v1/classes"), getOk("/api/v1/policy")]);
    st.tree = tree;
    st.policy = pol;
    const kv = [["epoch", pol.epoch], ["source", pol.source], ["config", pol.config],
                ["script", pol.script || "-"], ["reloads", pol.reloads],
                ["reload failures", pol.reload_failures], ["last error", pol.last_error || "-"]];
    if (pol.token_error) kv.push(["token file", pol.token_error]);
    fillTable($("policy-table"), [{ h: "", f: (r) => r[0] }, { h: "", f: (r) => String(r[1]) }], kv);
    $("policy-script").hidden = !pol.script_text;
    $("policy-text").textContent = pol.script_text || "";
    drawClasses();
  }

  async function detect() {
    // The served API document says which optional endpoints this weir has.
    try {
      const doc = await getOk("/api/v1/openapi.json");
      const paths = doc.paths || {};
      if (!paths["/api/v1/hosts"]) st.features.hosts = false;
      if (!paths["/api/v1/subscribers"]) st.features.subscribers = false;
      for (const p in paths)
        if (p.startsWith("/api/v1/subscribers/{") && paths[p].patch) st.features.subPatch = p;
    } catch (e) {
      if (e.status === 401) throw e;
    }
  }

  // ---- the loop ----

  async function poll() {
    const t = performance.now() / 1000;
    const [s, c] = await Promise.all([getOk("/api/v1/status"), getOk("/api/v1/counters")]);
    onCounters(c, s, t);
    drawLink();
    if (st.polls % TREE_EVERY === 0 || !st.tree) await slowTree();
    if (st.polls % FLOWS_EVERY === 0) {
      await Promise.all([slowFlows(), slowHosts(), slowSubscribers()]);
      drawFlows();
      drawHosts();
      drawSubscribers();
      drawTcp();
    }
    drawClasses();
    st.polls++;
  }

  async function loop() {
    st.timer = null;
    if (st.busy) return;
    st.busy = true;
    const t0 = performance.now();
    let stop = false;
    try {
      if (st.polls === 0) await detect();
      await poll();
      if (st.firstDataAt === undefined) st.firstDataAt = performance.now();
      $("banner").hidden = true;
      $("hdr-state").textContent = "live";
      $("hdr-state").className = "state live";
      st.lastError = "";
    } catch (e) {
      st.lastError = e.message;
      $("hdr-state").className = "state";
      if (e.status === 401) {
        stop = true;            // until a token is given
      } else {
        $("banner").hidden = false;
        $("banner").textContent = `weir did not answer: ${e.message}`;
        $("hdr-state").textContent = "no answer";
      }
    } finally {
      st.busy = false;
    }
    if (!stop && !document.hidden) st.timer = setTimeout(loop, Math.max(100, POLL_MS - (performance.now() - t0)));
  }

  function restart() {
    if (st.timer) clearTimeout(st.timer);
    st.polls = 0;
    st.prev = null;
    st.flowPrev = st.hostPrev = st.subPrev = null;
    loop();
  }

  // A hidden tab stops polling; its history resumes with a gap.
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && !st.timer && !st.busy) { st.prev = null; st.flowPrev = null; loop(); }
  });

  $("poll-s").textContent = String(POLL_MS / 1000);
  $("hist-min").textContent = String(HISTORY_S / 60);
  loop();
})();

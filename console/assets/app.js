// dropstream console: plain JS over the /v1/console/ routes. No library.
"use strict";
(function () {
  const REFRESH_MS = 2000;
  const KEY = "dropstream.apikey";
  const $ = (s, el) => (el || document).querySelector(s);
  const state = { scope: "", graph: null, stages: [], tab: "flows", control: false, jaeger: "", timer: 0, dlTopic: "", seriesAt: 0, seriesEvery: 0 };

  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") el.className = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null && v !== false) el.setAttribute(k, v);
    }
    for (const k of kids.flat(Infinity)) if (k !== null && k !== undefined) el.append(k.nodeType ? k : String(k));
    return el;
  }
  function s(tag, attrs, ...kids) {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
    for (const k of kids) el.append(k.nodeType ? k : document.createTextNode(String(k)));
    return el;
  }

  class AuthError extends Error {}
  async function call(path, opts) {
    opts = opts || {};
    const headers = { Accept: "application/json" };
    const key = sessionStorage.getItem(KEY);
    if (key) headers.Authorization = "Bearer " + key;
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(path, { method: opts.method || "GET", headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
    if (res.status === 401) throw new AuthError("unauthenticated");
    const body = res.headers.get("Content-Type") && res.headers.get("Content-Type").includes("json") ? await res.json() : null;
    if (!res.ok) {
      const e = new Error((body && body.error && body.error.message) || res.status + " " + res.statusText);
      e.status = res.status;
      throw e;
    }
    return body;
  }

  function status(text, bad) {
    const el = $("#status");
    el.textContent = text;
    el.className = bad ? "err" : "";
  }
  function fmtN(n) { return n < 0 ? "?" : n >= 1e6 ? (n / 1e6).toFixed(1) + "M" : n >= 1e4 ? (n / 1e3).toFixed(1) + "k" : String(n); }
  function fmtS(sec) { return sec <= 0 ? "–" : sec < 60 ? sec.toFixed(1) + "s" : sec < 3600 ? (sec / 60).toFixed(1) + "m" : (sec / 3600).toFixed(1) + "h"; }
  function fmtMs(ms) { return ms < 0 ? "–" : ms < 1 ? ms.toFixed(2) + "ms" : ms < 1000 ? ms.toFixed(1) + "ms" : (ms / 1000).toFixed(2) + "s"; }
  function fmtT(t) { const d = new Date(t); return isNaN(d) ? "" : d.toLocaleTimeString(); }
  const canAct = () => state.scope === "admin" || state.scope === "open";

  // ---- login ----------------------------------------------------------
  function askKey(msg) {
    $("#login").hidden = false;
    $("main").hidden = true;
    $("#loginerr").textContent = msg || "";
    status("needs an API key", true);
  }
  $("#login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, $("#key").value.trim());
    $("#key").value = "";
    start();
  });
  $("#keybtn").addEventListener("click", () => { sessionStorage.removeItem(KEY); location.reload(); });

  // ---- tabs -----------------------------------------------------------
  for (const b of document.querySelectorAll("#tabs button")) {
    b.addEventListener("click", () => {
      state.tab = b.dataset.tab;
      state.seriesAt = 0;
      for (const x of document.querySelectorAll("#tabs button")) x.classList.toggle("on", x === b);
      for (const t of document.querySelectorAll(".tab")) t.classList.toggle("on", t.id === state.tab);
      refresh();
    });
  }

  // ---- graph ----------------------------------------------------------
  // Columns by depth from the producers: API and services, then each topic
  // one column right of what publishes to it, each stage right of its topic.
  function layout(g) {
    const nodes = new Map();
    const edges = [];
    const node = (id, kind, label, flow) => {
      if (!nodes.has(id)) nodes.set(id, { id, kind, label, flow, col: 0, row: 0 });
      return nodes.get(id);
    };
    for (const f of g.flows) {
      for (const st of f.stages || []) node("s:" + st.name, st.history ? "history" : "stage", st.name, f.name);
      for (const sv of f.services || []) node("s:" + sv, "service", sv, f.name);
      for (const e of f.edges || []) {
        const from = e.from === "api" ? node("api:" + f.name, "service", f.name + " API", f.name) : node("s:" + e.from, "service", e.from, f.name);
        node("t:" + e.topic, "topic", e.topic, f.name);
        edges.push([from.id, "t:" + e.topic]);
      }
    }
    for (const f of g.flows) for (const st of f.stages || []) {
      const t = node("t:" + st.topic, "topic", st.topic, f.name);
      edges.push([t.id, "s:" + st.name]);
    }
    // A cycle (a stage publishing to a topic upstream of it) would push
    // its columns right without end: its back edges, found depth first
    // from the producers, do not place nodes.
    const out = new Map(), into = new Set(edges.map(([, b]) => b)), back = new Set(), mark = new Map();
    for (const [a, b] of edges) out.set(a, [...(out.get(a) || []), b]);
    const visit = (id) => {
      mark.set(id, 1);
      for (const b of out.get(id) || []) {
        if (mark.get(b) === 1) back.add(id + ">" + b);
        else if (!mark.has(b)) visit(b);
      }
      mark.set(id, 2);
    };
    for (const id of [...nodes.keys()].sort((a, b) => into.has(a) - into.has(b))) if (!mark.has(id)) visit(id);
    const placing = edges.filter(([a, b]) => !back.has(a + ">" + b));
    for (let i = 0; i < nodes.size * 2; i++) {
      let moved = false;
      for (const [a, b] of placing) {
        const na = nodes.get(a), nb = nodes.get(b);
        if (nb.col < na.col + 1 && na.col < nodes.size) { nb.col = na.col + 1; moved = true; }
      }
      if (!moved) break;
    }
    return { nodes: [...nodes.values()], edges };
  }

  const W = 150, H = 54, GX = 40, GY = 12;
  function drawGraph() {
    const svg = $("#graph");
    const { nodes, edges } = layout(state.graph);
    const flows = state.graph.flows.map((f) => f.name);
    let y = 10;
    const bands = [];
    for (const f of flows) {
      const mine = nodes.filter((n) => n.flow === f);
      const rows = {};
      for (const n of mine) { n.row = rows[n.col] || 0; rows[n.col] = n.row + 1; }
      const height = Math.max(1, ...Object.values(rows)) * (H + GY) + 24;
      for (const n of mine) { n.x = 10 + n.col * (W + GX); n.y = y + 20 + n.row * (H + GY); }
      bands.push({ f, y, height });
      y += height + 8;
    }
    const maxCol = Math.max(...nodes.map((n) => n.col));
    const width = 20 + (maxCol + 1) * (W + GX);
    // Scaled to the window (viewBox); zoomed and panned by moving the box.
    state.full = [0, 0, width, y];
    state.vb = state.full.slice();
    svg.setAttribute("viewBox", state.vb.join(" "));
    svg.replaceChildren();
    for (const b of bands) {
      svg.append(s("rect", { class: "flowband", x: 4, y: b.y, width: width - 8, height: b.height, rx: 6 }));
      svg.append(s("text", { class: "flowname", x: 10, y: b.y + 14 }, b.f));
    }
    const byId = new Map(nodes.map((n) => [n.id, n]));
    for (const [a, b] of edges) {
      const na = byId.get(a), nb = byId.get(b);
      const x1 = na.x + W, y1 = na.y + H / 2, x2 = nb.x, y2 = nb.y + H / 2;
      const mx = (x1 + x2) / 2;
      svg.append(s("path", { class: "edge" + (na.flow !== nb.flow ? " cross" : ""), d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}` }));
    }
    for (const n of nodes) {
      const isStage = n.kind === "stage" || n.kind === "history";
      const g = s("g", { class: (isStage ? "stage" : n.kind) + (n.kind === "history" ? " history" : ""), transform: `translate(${n.x},${n.y})` });
      if (isStage) g.setAttribute("data-stage", n.label);
      if (n.kind === "topic") g.setAttribute("data-topic", n.label);
      g.append(s("rect", { width: W, height: n.kind === "topic" ? 26 : H, rx: n.kind === "topic" ? 13 : 3 }));
      g.append(s("text", { x: 6, y: 16 }, n.label.length > 24 ? n.label.slice(0, 23) + "…" : n.label));
      if (isStage) {
        g.append(s("text", { class: "fig f1", x: 6, y: 32 }, ""));
        g.append(s("text", { class: "fig f2", x: 6, y: 46 }, ""));
        g.append(s("title", {}, n.label));
      }
      svg.append(g);
    }
    paintGraph();
  }

  function zoom(f, cx, cy) {
    const [x, y, w, hh] = state.vb;
    cx = cx === undefined ? x + w / 2 : cx;
    cy = cy === undefined ? y + hh / 2 : cy;
    state.vb = [cx - (cx - x) * f, cy - (cy - y) * f, w * f, hh * f];
    $("#graph").setAttribute("viewBox", state.vb.join(" "));
  }
  for (const b of document.querySelectorAll("#zoom button")) {
    b.addEventListener("click", () => {
      if (b.dataset.z === "fit") { state.vb = state.full.slice(); zoom(1); } else zoom(b.dataset.z === "in" ? 0.8 : 1.25);
    });
  }
  // The graph's units per screen pixel.
  const scale = () => { const r = $("#graph").getBoundingClientRect(); return Math.max(state.vb[2] / r.width, state.vb[3] / r.height); };
  $("#graph").addEventListener("wheel", (ev) => {
    if (!ev.ctrlKey && !ev.metaKey) return;
    ev.preventDefault();
    const r = $("#graph").getBoundingClientRect(), k = scale();
    zoom(ev.deltaY < 0 ? 0.9 : 1.1, state.vb[0] + (ev.clientX - r.left) * k, state.vb[1] + (ev.clientY - r.top) * k);
  }, { passive: false });
  $("#graph").addEventListener("pointerdown", (ev) => {
    const svg = $("#graph"), k = scale(), x0 = ev.clientX, y0 = ev.clientY, vb0 = state.vb.slice();
    const move = (e) => { state.vb = [vb0[0] - (e.clientX - x0) * k, vb0[1] - (e.clientY - y0) * k, vb0[2], vb0[3]]; svg.setAttribute("viewBox", state.vb.join(" ")); };
    const up = () => { svg.removeEventListener("pointermove", move); svg.classList.remove("panning"); };
    svg.setPointerCapture(ev.pointerId);
    svg.classList.add("panning");
    svg.addEventListener("pointermove", move);
    svg.addEventListener("pointerup", up, { once: true });
  });

  function paintGraph() {
    for (const st of state.stages) {
      const g = document.querySelector(`#graph g[data-stage="${CSS.escape(st.stage)}"]`);
      if (!g) continue;
      g.classList.toggle("dead", st.dead_letters > 0);
      g.classList.toggle("paused", !!st.paused);
      $(".f1", g).textContent = `${st.throughput}/s · p99 ${fmtMs(st.p99_ms)} · ×${st.copies}`;
      $(".f2", g).textContent = `lag ${fmtN(st.lag)} · pend ${fmtN(st.pending)} · dead ${fmtN(st.dead_letters)}` + (st.paused ? " · paused" : "");
      $("title", g).textContent = `${st.stage} (group ${st.group} on ${st.topic})\nthroughput ${st.throughput}/s (cluster)\n` +
        `p99 ${fmtMs(st.p99_ms)} (this process's own handlers)\nlag ${st.lag}, pending ${st.pending}, oldest ${fmtS(st.oldest_pending_s)}\n` +
        `dead letters ${st.dead_letters}, copies ${st.copies}`;
    }
  }

  function paintTable() {
    const tb = $("#stages tbody");
    const rows = [];
    for (const st of state.stages) {
      const act = state.control && canAct()
        ? h("button", { class: "act", onclick: () => control(st.stage, st.paused ? "resume" : "pause") }, st.paused ? "Resume" : "Pause")
        : "";
      rows.push(h("tr", { "data-stage": st.stage },
        h("td", {}, st.flow), h("td", {}, st.stage + (st.history ? " (history)" : "")), h("td", {}, st.topic),
        h("td", { class: "num throughput" }, st.throughput),
        h("td", { class: "num p99" }, fmtMs(st.p99_ms)),
        h("td", { class: "num lag" + (st.lag > 1000 ? " warn" : "") }, fmtN(st.lag)),
        h("td", { class: "num pending" }, fmtN(st.pending)),
        h("td", { class: "num oldest" + (st.oldest_pending_s > 60 ? " warn" : "") }, fmtS(st.oldest_pending_s)),
        h("td", { class: "num dead" + (st.dead_letters > 0 ? " bad" : "") }, fmtN(st.dead_letters)),
        h("td", { class: "num copies" }, st.copies),
        h("td", { class: "paused" }, st.paused === undefined ? (st.known ? "running" : "no group yet") : st.paused ? "paused" : "running"),
        h("td", { class: "actions-col" }, act)));
    }
    tb.replaceChildren(...rows);
  }

  async function control(stage, what) {
    try {
      await call(`/v1/admin/stages/${encodeURIComponent(stage)}/${what}`, { method: "POST" });
      state.stages = [];
      await refreshStages();
    } catch (e) { status(`${what} ${stage}: ${e.message}`, true); }
  }

  async function refreshStages() {
    const v = await call("/v1/console/stages");
    let paused = null;
    if (state.control) {
      try {
        const a = await call("/v1/admin/stages?limit=1000");
        paused = new Map((a.items || a.stages || []).map((x) => [x.stage || x.name, !!x.paused]));
      } catch (e) { if (e.status === 404) state.control = false; }
    }
    for (const st of v.items) if (paused && paused.has(st.stage)) st.paused = paused.get(st.stage);
    state.stages = v.items;
    paintGraph();
    paintTable();
    fillTopics();
  }

  // ---- charts ---------------------------------------------------------
  // A sparkline of vals at times ts (ms) ending at t1, over the window or
  // the samples' span when shorter; negative values (unknown) are left out.
  const SW = 160, SH = 30;
  function spark(cls, ts, vals, t1, win) {
    if (ts.length > 1) win = Math.min(win, t1 - ts[0]);
    const pts = ts.map((t, i) => [t, vals[i]]).filter(([, v]) => v >= 0);
    const top = Math.max(1e-9, ...pts.map(([, v]) => v));
    const xy = pts.map(([t, v]) => `${((t - t1 + win) / win * SW).toFixed(1)},${(SH - 2 - v / top * (SH - 4)).toFixed(1)}`);
    return s("svg", { class: "spark " + cls, viewBox: `0 0 ${SW} ${SH}`, preserveAspectRatio: "none", "data-points": xy.length },
      s("polyline", { points: xy.join(" ") }));
  }
  const CHARTS = [["throughput", "msg/s", (v) => v + "/s"], ["lag", "lag", fmtN], ["pending", "pending", fmtN], ["p99_ms", "p99 (this process)", fmtMs]];
  function paintCharts(v) {
    $("#interval").textContent = v.interval_s;
    const ts = v.at.map((t) => Date.parse(t));
    const t1 = ts.length ? ts[ts.length - 1] : Date.now(), win = v.window_s * 1000;
    $("#chartgrid").replaceChildren(...v.stages.map((st) => h("div", { class: "chart", "data-stage": st.stage },
      h("h3", {}, h("span", { class: "flowname" }, st.flow), " ", st.stage + (st.history ? " (history)" : "")),
      CHARTS.map(([k, label, fmt]) => {
        const vals = st[k], known = vals.filter((x) => x >= 0);
        const now = known.length ? fmt(vals[vals.length - 1]) : "–";
        const row = h("div", { class: "row" }, h("span", { class: "label" }, label), spark(k, ts, vals, t1, win), h("span", { class: "now" }, now));
        row.title = `${st.stage} ${label}: now ${now}, max ${known.length ? fmt(Math.max(...known)) : "–"} over ${ts.length} samples`;
        return row;
      }))));
  }
  function paintBoard(v) {
    const svg = $("#boardchart"), n = v.transitions.length, bw = 450 / Math.max(1, n);
    const top = Math.max(1, ...v.transitions.map((m) => Math.max(m.opened, m.closed)));
    svg.replaceChildren(s("line", { class: "axis", x1: 0, x2: 450, y1: 40, y2: 40 }), ...v.transitions.flatMap((m, i) => [
      s("rect", { class: "opened", x: i * bw + 2, width: bw - 4, y: 40 - m.opened / top * 38, height: m.opened / top * 38 },
        s("title", {}, `${fmtT(m.at)}: ${m.opened} opened, ${m.closed} closed`)),
      s("rect", { class: "closed", x: i * bw + 2, width: bw - 4, y: 40, height: m.closed / top * 38 })]),
    s("text", { x: 2, y: 10 }, String(top)), s("text", { x: 2, y: 78 }, String(top)));
    svg.setAttribute("data-minutes", n);
  }
  async function refreshSeries() {
    if (Date.now() - state.seriesAt < state.seriesEvery) return;
    const v = await call("/v1/console/series");
    state.seriesAt = Date.now();
    state.seriesEvery = Math.min(v.interval_s * 1000, 10000);
    paintCharts(v);
    paintBoard(v);
  }

  // ---- dead letters ---------------------------------------------------
  function fillTopics() {
    const sel = $("#dltopic");
    const counts = new Map();
    for (const st of state.stages) counts.set(st.topic, Math.max(counts.get(st.topic) || 0, st.dead_letters));
    const want = [...counts.keys()].sort();
    if (sel.options.length !== want.length) {
      sel.replaceChildren(...want.map((t) => h("option", { value: t }, t)));
      const first = want.find((t) => counts.get(t) > 0);
      if (first) sel.value = first;
      state.dlTopic = sel.value;
    }
    for (const o of sel.options) o.textContent = `${o.value} (${counts.get(o.value) || 0})`;
  }
  $("#dltopic").addEventListener("change", () => { state.dlTopic = $("#dltopic").value; refresh(); });

  async function refreshDead() {
    if (!state.dlTopic) return;
    const p = await call(`/v1/console/deadletters?topic=${encodeURIComponent(state.dlTopic)}&limit=50`);
    $("#dlcount").textContent = `${p.count} dead letter${p.count === 1 ? "" : "s"}` + (p.count > p.items.length ? `, the oldest ${p.items.length} shown` : "");
    const rows = p.items.map((d) => h("tr", { "data-ref": d.ref },
      h("td", {}, d.ref), h("td", {}, d.stage), h("td", {}, d.reason), h("td", { class: "num" }, d.attempts), h("td", {}, fmtT(d.at)),
      h("td", {}, h("pre", {}, (d.type ? d.type + " " : "") + (d.key ? "[" + d.key + "] " : "") + d.payload + (d.clipped ? "…" : ""))),
      h("td", { class: "actions-col" }, canAct() ? [
        h("button", { class: "replay", onclick: () => dlAct("replay", p.topic, d.ref) }, "Replay"),
        h("button", { class: "purge", onclick: () => dlAct("purge", p.topic, d.ref) }, "Purge")] : "")));
    $("#dltable tbody").replaceChildren(...rows);
  }
  async function dlAct(what, topic, ref) {
    try {
      const r = await call(`/v1/console/deadletters/${what}`, { method: "POST", body: { topic, refs: [ref] } });
      status(`${what}: ${r.done} done`);
      await refreshDead();
    } catch (e) { status(`${what}: ${e.message}`, true); }
  }

  // ---- events ---------------------------------------------------------
  function traceLink(id) {
    if (!id) return "";
    return h("a", { class: "trace", title: "open this trace", onclick: () => openTrace(id) }, id.slice(0, 12) + "…");
  }
  async function refreshEvents() {
    const flows = state.graph.event_flows || [];
    const pages = await Promise.all(flows.map((f) => call(`/v1/console/events?flow=${encodeURIComponent(f)}&limit=30`)));
    const all = pages.flatMap((p) => p.items.map((e) => Object.assign(e, { flow: p.flow })));
    all.sort((a, b) => new Date(b.time) - new Date(a.time));
    $("#eventlist").replaceChildren(...all.slice(0, 80).map((e) => h("li", { "data-kind": e.kind },
      h("span", { class: "time" }, fmtT(e.time)), h("span", { class: "kind" }, e.kind), " ", h("b", {}, e.subject), " — ", e.summary, " ",
      (e.steps || []).map((st) => h("span", { class: "chip" + (st.ok ? "" : " fail") }, st.name + ": " + (st.result || (st.ok ? "ok" : "failed")))),
      (e.cause || []).length ? [" ← ", (e.cause || []).map((c) => h("span", { class: "chip" }, c.kind + " " + c.id))] : "",
      " ", traceLink(e.trace_id),
      e.kind === "notification" && e.id ? h("button", { class: "why", onclick: () => why(e.id) }, "why") : "")));
  }
  async function why(id) {
    const box = $("#why");
    box.hidden = false;
    try {
      const w = await call(`/v1/notifications/${encodeURIComponent(id)}/why`);
      const n = w.notification;
      box.replaceChildren(h("div", {}, h("b", {}, "why notification " + n.id), h("br"),
        `notification: ${n.status} to ${n.subscriber_id} via ${n.channel} at ${fmtT(n.at)} — ${n.subject}`, h("br"),
        w.transition ? [`← transition ${w.transition.event_id} ${w.transition.kind || ""} ${w.transition.entity_key || ""}`, h("br")] : "",
        w.run ? [`← run ${w.run.run_id} ${w.run.source_id || ""} ${w.run.status || ""}`, h("br")] : "",
        "← trace ", traceLink(w.trace_id), w.complete ? "" : " (chain incomplete: ClickHouse not configured or not written yet)"));
    } catch (e) { box.textContent = "why: " + e.message; }
  }

  // ---- traces ---------------------------------------------------------
  async function refreshTraces() {
    const p = await call("/v1/console/traces");
    $("#tracelist").replaceChildren(...p.items.map((t) => h("li", { "data-trace": t.trace_id, class: t.trace_id === state.trace ? "on" : "", onclick: () => openTrace(t.trace_id) },
      h("b", {}, t.root || "(no root)"), h("br"), h("span", { class: "time" }, fmtT(t.start)),
      `${t.spans} spans · ${fmtMs(t.duration_ms)}`, t.errors ? h("span", { class: "err" }, ` · ${t.errors} errors`) : "")));
  }
  async function openTrace(id) {
    state.trace = id;
    if (state.tab !== "traces") $('#tabs button[data-tab="traces"]').click();
    const box = $("#waterfall");
    let t;
    try { t = await call(`/v1/console/traces/${encodeURIComponent(id)}`); } catch (e) {
      box.replaceChildren(h("p", {}, `trace ${id}: ${e.message}`), state.jaeger ? h("a", { href: `${state.jaeger}/trace/${id}`, target: "_blank", rel: "noopener" }, "open in Jaeger") : "");
      return;
    }
    const t0 = Math.min(...t.spans.map((x) => Date.parse(x.start)));
    const t1 = Math.max(...t.spans.map((x) => Date.parse(x.end)));
    const span = Math.max(1, t1 - t0);
    const depth = new Map();
    const ids = new Set(t.spans.map((x) => x.span_id));
    for (const x of t.spans) depth.set(x.span_id, x.parent_id && ids.has(x.parent_id) ? (depth.get(x.parent_id) || 0) + 1 : 0);
    const rows = t.spans.map((x) => {
      const bar = h("span", { class: x.error ? "error" : "", title: `${x.name} ${fmtMs(Date.parse(x.end) - Date.parse(x.start))}` + (x.error ? " — " + x.error : "") });
      bar.style.left = ((Date.parse(x.start) - t0) / span * 100) + "%";
      bar.style.width = ((Date.parse(x.end) - Date.parse(x.start)) / span * 100) + "%";
      const name = h("div", { title: Object.entries(x.attrs || {}).map(([k, v]) => k + "=" + v).join("\n") }, "\u00a0".repeat(2 * depth.get(x.span_id)) + x.name);
      const links = (x.links || []).map((l) => h("a", { class: "trace", onclick: () => openTrace(l.trace_id) }, " ↪ " + l.trace_id.slice(0, 8)));
      return h("div", { class: "row", "data-span": x.span_id }, h("div", {}, name, h("span", { class: "links" }, links)), h("div", { class: "bar" }, bar));
    });
    box.replaceChildren(h("p", {}, h("b", {}, "trace " + id), ` · ${t.spans.length} spans · ${fmtMs(span)} `,
      state.jaeger ? h("a", { href: `${state.jaeger}/trace/${id}`, target: "_blank", rel: "noopener" }, "open in Jaeger") : ""), ...rows);
    refreshTraces();
  }

  // ---- availability ---------------------------------------------------
  async function refreshAvail() {
    const open = new Map();
    let cursor = "";
    for (let i = 0; i < 5; i++) {
      const p = await call("/v1/availability?state=open&limit=1000" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
      for (const e of p.items) {
        const v = e.venue_name || e.venue || "?";
        open.set(v, (open.get(v) || 0) + 1);
      }
      cursor = p.next_cursor;
      if (!cursor) break;
    }
    const sessions = new Map();
    try {
      const st = await call("/v1/stats/availability?group_by=venue");
      for (const r of st.sessions || []) sessions.set(r.key.venue || r.key.value || Object.values(r.key).join(" "), r);
      $("#sessionsnote").textContent = `sessions ${st.from} – ${st.to}`;
    } catch (e) {
      $("#sessionsnote").textContent = e.status === 503 ? "Sessions per venue need ClickHouse (DROPSTREAM_CLICKHOUSE_DSN)." : "sessions: " + e.message;
    }
    const names = [...new Set([...open.keys(), ...sessions.keys()])].sort();
    $("#venues tbody").replaceChildren(...names.map((v) => {
      const r = sessions.get(v);
      return h("tr", { "data-venue": v }, h("td", {}, v), h("td", { class: "num open" }, open.get(v) || 0),
        h("td", { class: "num" }, r ? r.sessions : "–"), h("td", { class: "num" }, r ? fmtMs(r.mean_duration_ms) : "–"),
        h("td", { class: "num" }, r ? fmtMs(r.p90_duration_ms) : "–"));
    }));
  }

  // ---- loop -----------------------------------------------------------
  let busy = false;
  async function refresh() {
    if (busy || !state.graph) return;
    busy = true;
    try {
      await refreshStages();
      if (state.tab === "dead") await refreshDead();
      if (state.tab === "events") await refreshEvents();
      if (state.tab === "traces") await refreshTraces();
      if (state.tab === "avail") await refreshAvail();
      if (state.tab === "avail" || state.tab === "charts") await refreshSeries();
      status(`live · ${state.scope === "open" ? "open API" : state.scope + " key"} · ${new Date().toLocaleTimeString()}`);
    } catch (e) {
      if (e instanceof AuthError) { clearInterval(state.timer); askKey("The key was refused."); } else status(e.message, true);
    } finally { busy = false; }
  }

  async function start() {
    try {
      const ses = await call("/v1/console/session");
      state.scope = ses.scope;
      state.jaeger = (ses.jaeger_ui_url || "").replace(/\/$/, "");
      state.graph = await call("/v1/console/graph");
    } catch (e) {
      if (e instanceof AuthError) askKey(sessionStorage.getItem(KEY) ? "The key was refused." : "");
      else status(e.message, true);
      return;
    }
    $("#login").hidden = true;
    $("main").hidden = false;
    // Pause and resume are offered when the API has the stage controls.
    try { await call("/v1/admin/stages?limit=1000"); state.control = true; } catch (e) { state.control = false; }
    document.body.classList.toggle("readonly", !canAct());
    drawGraph();
    await refresh();
    clearInterval(state.timer);
    state.timer = setInterval(refresh, REFRESH_MS);
  }
  start();
})();

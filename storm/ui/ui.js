// Storm UI (OWLer): a small page over the REST API of eu.ows.owler.storm.UiServer.
// Everything is built with DOM calls and textContent (no HTML from the data).
"use strict";

const openComponents = new Set();   // "topologyId\u0000componentId" of expanded components
let timer = null;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") e.onclick = v; else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// columns: [field, title, options]; options.l = left aligned, options.fmt(value, row) -> string|Node
function table(rows, columns) {
  if (!rows || rows.length === 0) return el("p", { class: "empty" }, "none");
  const head = el("tr", {}, ...columns.map(([, title, o]) => el("th", { class: o && o.l ? "l" : "" }, title)));
  const body = rows.map(row => el("tr", {}, ...columns.map(([field, , o]) => {
    const v = row[field];
    const shown = o && o.fmt ? o.fmt(v, row) : (v === null || v === undefined ? "" : v);
    const cls = (o && o.l ? "l " : "") + (o && o.cls ? o.cls(v, row) : "");
    return el("td", { class: cls.trim() }, shown);
  })));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...body));
}

function when(secs) {
  if (!secs) return "";
  return new Date(secs * 1000).toLocaleString();
}

// First line of the last error, with when and where; the whole text is on the component's page.
const errorCol = ["lastError", "Last error", { l: true, cls: () => "err",
  fmt: (v, r) => v ? `${v.split("\n")[0]}${r.errorTime ? "  (" + when(r.errorTime) + ", " + r.errorHost + ":" + r.errorPort + ")" : ""}` : "" }];
const capacityCol = ["capacity", "Capacity", { cls: v => (parseFloat(v) >= 0.8 ? "hot" : "") }];

async function getJson(path) {
  const resp = await fetch(path, { cache: "no-store" });
  let body;
  try { body = await resp.json(); } catch (e) { throw new Error(`${path}: HTTP ${resp.status}`); }
  if (!resp.ok || body.error) throw new Error(`${path}: ${body.error || resp.status}\n${body.errorMessage || ""}`);
  return body;
}

function params() {
  const w = document.getElementById("window").value;
  const sys = document.getElementById("sys").checked;
  return `window=${encodeURIComponent(w)}&sys=${sys}`;
}

function replace(id, node) {
  const target = document.getElementById(id);
  target.replaceChildren(node);
}

function componentLink(topoId, compId) {
  const key = topoId + "\u0000" + compId;
  return el("a", { class: "comp", title: "show executors and errors", onclick: () => {
    if (openComponents.has(key)) openComponents.delete(key); else openComponents.add(key);
    loop();
  } }, compId);
}

async function componentSection(topoId, compId) {
  const c = await getJson(`api/v1/topology/${encodeURIComponent(topoId)}/component/${encodeURIComponent(compId)}?${params()}`);
  const parts = [el("h3", {}, `${c.componentType} ${c.id}: ${c.executors} executors, ${c.tasks} tasks`)];
  if (c.componentType === "spout") {
    parts.push(table(c.executorStats, [["id", "Executor", { l: true }], ["host", "Host", { l: true }], ["port", "Port"],
      ["uptime", "Uptime"], ["emitted", "Emitted"], ["transferred", "Transferred"],
      ["completeLatency", "Complete latency (ms)"], ["acked", "Acked"], ["failed", "Failed"]]));
    parts.push(table(c.outputStats, [["stream", "Output stream", { l: true }], ["emitted", "Emitted"],
      ["transferred", "Transferred"], ["completeLatency", "Complete latency (ms)"], ["acked", "Acked"], ["failed", "Failed"]]));
  } else {
    parts.push(table(c.executorStats, [["id", "Executor", { l: true }], ["host", "Host", { l: true }], ["port", "Port"],
      ["uptime", "Uptime"], ["emitted", "Emitted"], ["transferred", "Transferred"], capacityCol,
      ["executeLatency", "Execute latency (ms)"], ["executed", "Executed"], ["processLatency", "Process latency (ms)"],
      ["acked", "Acked"], ["failed", "Failed"]]));
    parts.push(table(c.inputStats, [["component", "Input from", { l: true }], ["stream", "Stream", { l: true }],
      ["executeLatency", "Execute latency (ms)"], ["executed", "Executed"], ["processLatency", "Process latency (ms)"],
      ["acked", "Acked"], ["failed", "Failed"]]));
    parts.push(table(c.outputStats, [["stream", "Output stream", { l: true }], ["emitted", "Emitted"], ["transferred", "Transferred"]]));
  }
  parts.push(el("h3", {}, `Errors (${c.componentErrors.length})`));
  parts.push(table(c.componentErrors.slice().reverse(), [["errorTime", "Time", { l: true, fmt: when }],
    ["errorHost", "Host", { l: true }], ["errorPort", "Port"],
    ["error", "Error", { l: true, cls: () => "err", fmt: v => el("pre", {}, v) }]]));
  return el("div", { class: "component" }, ...parts);
}

async function topologySection(summary) {
  const t = await getJson(`api/v1/topology/${encodeURIComponent(summary.id)}?${params()}`);
  const parts = [
    el("h2", {}, `${t.name} `, el("small", {}, `${t.id} · ${t.status} · up ${t.uptime} · ${t.workersTotal} workers, ` +
      `${t.executorsTotal} executors, ${t.tasksTotal} tasks · `,
      // the crawl over time: `owler dashboard`, passed on by UiServer.java
      el("a", { href: "owler/dashboard/", class: "dashboard" }, "crawl dashboard"))),
    table(t.topologyStats, [["windowPretty", "Window", { l: true }], ["emitted", "Emitted"], ["transferred", "Transferred"],
      ["completeLatency", "Complete latency (ms)"], ["acked", "Acked"], ["failed", "Failed"]]),
    el("h3", {}, `Spouts (${t.windowHint})`),
    table(t.spouts, [["spoutId", "Spout", { l: true, fmt: v => componentLink(t.id, v) }], ["executors", "Executors"],
      ["tasks", "Tasks"], ["emitted", "Emitted"], ["transferred", "Transferred"],
      ["completeLatency", "Complete latency (ms)"], ["acked", "Acked"], ["failed", "Failed"], errorCol]),
    el("h3", {}, `Bolts (${t.windowHint})`),
    table(t.bolts, [["boltId", "Bolt", { l: true, fmt: v => componentLink(t.id, v) }], ["executors", "Executors"],
      ["tasks", "Tasks"], ["emitted", "Emitted"], ["transferred", "Transferred"], capacityCol,
      ["executeLatency", "Execute latency (ms)"], ["executed", "Executed"], ["processLatency", "Process latency (ms)"],
      ["acked", "Acked"], ["failed", "Failed"], errorCol]),
  ];
  for (const key of openComponents) {
    const [topoId, compId] = key.split("\u0000");
    if (topoId !== t.id) continue;
    try {
      parts.push(await componentSection(topoId, compId));
    } catch (e) {
      openComponents.delete(key);
    }
  }
  return el("section", { class: "topology" }, ...parts);
}

async function refresh() {
  const status = document.getElementById("status");
  const errorBox = document.getElementById("error");
  try {
    const [cluster, nimbus, sups, topos] = await Promise.all([
      getJson("api/v1/cluster/summary"), getJson("api/v1/nimbus/summary"),
      getJson("api/v1/supervisor/summary"), getJson("api/v1/topology/summary")]);
    replace("cluster", table([cluster], [["stormVersion", "Version"], ["nimbusUptime", "Nimbus uptime"],
      ["supervisors", "Supervisors"], ["slotsUsed", "Used slots"], ["slotsFree", "Free slots"], ["slotsTotal", "Total slots"],
      ["executorsTotal", "Executors"], ["tasksTotal", "Tasks"]]));
    replace("nimbus", table(nimbus.nimbuses, [["host", "Host", { l: true }], ["port", "Port"], ["status", "Status", { l: true }],
      ["version", "Version"], ["nimbusUpTime", "Uptime"]]));
    replace("supervisors", table(sups.supervisors, [["host", "Host", { l: true }], ["id", "Id", { l: true }],
      ["uptime", "Uptime"], ["slotsTotal", "Slots"], ["slotsUsed", "Used slots"], ["usedMem", "Used mem (MB)"],
      ["totalMem", "Total mem (MB)"], ["version", "Version"]]));
    replace("topologies", table(topos.topologies, [["name", "Name", { l: true }], ["id", "Id", { l: true }],
      ["status", "Status", { l: true }], ["uptime", "Uptime"], ["workersTotal", "Workers"],
      ["executorsTotal", "Executors"], ["tasksTotal", "Tasks"]]));
    const sections = await Promise.all(topos.topologies.map(t => topologySection(t).catch(
      e => el("section", { class: "topology" }, el("h2", {}, t.name), el("div", { class: "error" }, e.message)))));
    document.getElementById("details").replaceChildren(...sections);
    errorBox.hidden = true;
    status.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    errorBox.textContent = e.message;
    errorBox.hidden = false;
    status.textContent = "update failed " + new Date().toLocaleTimeString();
  }
}

// The next refresh is planned when the last one has finished, so slow answers never pile up.
let generation = 0;
async function loop() {
  const mine = ++generation;
  clearTimeout(timer);
  await refresh();
  if (mine !== generation) return;   // a newer loop() took over
  const every = parseInt(document.getElementById("every").value, 10);
  timer = every > 0 ? setTimeout(loop, every * 1000) : null;
}

for (const id of ["window", "sys", "every"]) document.getElementById(id).addEventListener("change", loop);
loop();

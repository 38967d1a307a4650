// The crawl dashboard's page: reads api/dashboard.json (src/owler/run/dashboard.py), shows the
// frontier's figures and one uPlot chart per chart of the JSON (src/owler/run/series.py builds
// them), and reads it again every `refresh` seconds while the run is live.
//
// For tests and scripts, each chart's <figure> carries data-points (values drawn) and data-ink
// (canvas pixels in the series' colours, counted after uPlot drew), each figure of the frontier a
// data-figure cell, and <body> data-ready once the first answer was shown.
"use strict";

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
                "#17becf", "#bcbd22", "#7f3fbf"];
const FIGURES = ["DISCOVERED", "FETCHED", "FETCH_ERROR", "REDIRECTION", "ERROR", "total",
                 "due_now", "queues", "queues_due"];
const plots = new Map(); // chart id -> {plot, labels}

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

function when(epoch) {
  return epoch ? new Date(epoch * 1000).toLocaleString() : "?";
}

function showRun(doc) {
  const p = document.getElementById("run");
  const run = doc.run;
  if (!run) {
    p.textContent = "no run recorded";
    return;
  }
  const state = run.live ? "running, refreshed every " + doc.refresh + " s"
                         : "ended " + when(run.ended || (doc.t.length ? doc.t[doc.t.length - 1] : 0));
  p.textContent = run.topology + " · run " + run.run + " · started " + when(run.started) + " · " + state;
  document.body.dataset.run = run.run;
  document.body.dataset.live = run.live ? "1" : "0";
}

function showProblems(list) {
  const ul = document.getElementById("problems");
  ul.replaceChildren(...list.map((text) => el("li", {}, text)));
}

function showStatus(status) {
  const table = document.getElementById("status");
  const queues = document.getElementById("queues");
  if (!status) {
    table.replaceChildren();
    queues.replaceChildren();
    return;
  }
  table.replaceChildren(...FIGURES.map((name) => {
    const tr = el("tr");
    tr.append(el("td", {}, name.replace("_", " ")),
              el("td", {class: "n", "data-figure": name}, String(status[name])));
    return tr;
  }));
  const list = (title, rows, unit) => {
    const ol = el("ol");
    rows.forEach(([key, n]) => ol.append(el("li", {}, key + ": " + n + unit)));
    return [el("h3", {}, title), rows.length ? ol : el("p", {}, "none")];
  };
  queues.replaceChildren(...list("Busiest queues", (status.top_hosts || []).slice(0, 5), " URLs"),
                         ...(status.most_delayed ? list("Most delayed queues", status.most_delayed,
                                                        " s due") : []),
                         el("p", {}, "frontier: " + status.frontier));
}

function inkOf(u, colors) {
  // pixels of the canvas in one of the series' colours: the drawn data, not the axes or grid
  const ctx = u.ctx;
  const {width, height} = ctx.canvas;
  const px = ctx.getImageData(0, 0, width, height).data;
  const rgb = colors.map((c) => [1, 3, 5].map((i) => parseInt(c.slice(i, i + 2), 16)));
  let n = 0;
  for (let i = 0; i < px.length; i += 4) {
    if (px[i + 3] < 200) continue;
    for (const [r, g, b] of rgb) {
      if (Math.abs(px[i] - r) + Math.abs(px[i + 1] - g) + Math.abs(px[i + 2] - b) < 24) {
        n++;
        break;
      }
    }
  }
  return n;
}

function figureOf(chart) {
  let fig = document.getElementById("chart-" + chart.id);
  if (!fig) {
    fig = el("figure", {class: "chart", id: "chart-" + chart.id, "data-chart": chart.id});
    fig.append(el("figcaption", {}, chart.title + " (" + chart.unit + ")"), el("div"));
    document.getElementById("charts").append(fig);
  }
  return fig;
}

function draw(chart, t) {
  const fig = figureOf(chart);
  const box = fig.lastChild;
  fig.dataset.points = chart.points;
  const labels = chart.series.map((s) => s.label).join("\n");
  const old = plots.get(chart.id);
  if (!chart.points || typeof uPlot === "undefined") {
    if (old) old.plot.destroy();
    plots.delete(chart.id);
    fig.dataset.ink = "0";
    box.replaceChildren(el("p", {class: "empty"}, typeof uPlot === "undefined"
      ? "the chart library is missing (make setup installs it)" : "no data yet"));
    return;
  }
  const data = [t, ...chart.series.map((s) => s.values)];
  if (old && old.labels === labels) {
    old.plot.setData(data);
    return;
  }
  if (old) old.plot.destroy();
  box.replaceChildren();
  const colors = chart.series.map((_, i) => COLORS[i % COLORS.length]);
  const opts = {
    width: Math.max(480, box.clientWidth || 560),
    height: 220,
    scales: {x: {time: true}},
    series: [{}, ...chart.series.map((s, i) => ({label: s.label, stroke: colors[i], width: 2}))],
    axes: [{}, {label: chart.unit, size: 60}],
    hooks: {draw: [(u) => { fig.dataset.ink = String(inkOf(u, colors)); }]},
  };
  plots.set(chart.id, {plot: new uPlot(opts, data, box), labels});
}

async function refresh() {
  let doc;
  try {
    const resp = await fetch("api/dashboard.json" + location.search, {cache: "no-store"});
    doc = await resp.json();
  } catch (err) {
    showProblems(["the dashboard's server cannot be reached: " + err]);
    setTimeout(refresh, 10000);
    return;
  }
  showRun(doc);
  showProblems(doc.problems || []);
  showStatus(doc.status);
  (doc.charts || []).forEach((chart) => draw(chart, doc.t));
  document.body.dataset.ready = "1";
  document.body.dataset.generated = String(doc.generated);
  if (doc.run && doc.run.live) setTimeout(refresh, doc.refresh * 1000);
}

refresh();

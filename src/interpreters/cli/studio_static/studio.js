// pipeline studio: builds the page from the studio's JSON with textContent and text nodes
// only, since journals hold model output; the server's CSP runs no inline script.
"use strict";

const main = document.getElementById("main");
const where = document.getElementById("where");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v;
    else if (k === "href") node.setAttribute("href", v);
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return node;
}

function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function details(label, value) {
  return el("details", {}, el("summary", { text: label }), el("pre", { text: pretty(value) }));
}

async function getJson(url) {
  const r = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function parseHash() {
  const [path, query] = (location.hash.slice(1) || "/").split("?");
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent),
           query: new URLSearchParams(query || "") };
}

function pager(page, base) {
  const bar = el("div", { class: "pager" });
  const { offset, limit, total } = page;
  bar.append(el("span", { text: `${total ? offset + 1 : 0}–${Math.min(offset + limit, total)} of ${total}` }));
  const sep = base.includes("?") ? "&" : "?";
  if (offset > 0) bar.append(el("a", { href: `${base}${sep}offset=${Math.max(0, offset - limit)}`, class: "prev", text: "← previous" }));
  if (offset + limit < total) bar.append(el("a", { href: `${base}${sep}offset=${offset + limit}`, class: "next", text: "next →" }));
  return bar;
}

function summary(fields) {
  const box = el("div", { class: "summary" });
  for (const [k, v] of fields) {
    if (v === null || v === undefined) continue;
    box.append(el("div", { class: "field" }, el("b", { text: k + ":" }), pretty(v)));
  }
  return box;
}

async function showRuns(query) {
  const offset = Number(query.get("offset") || 0);
  const data = await getJson(`/api/runs?offset=${offset}&limit=50`);
  where.textContent = "runs";
  main.replaceChildren();
  main.append(el("h1", { text: "Recorded runs" }));
  if (data.agent) main.append(el("p", { text: `Replays run against agent ${data.agent}.` }));
  if (data.truncated) main.append(el("p", { class: "error", text: "Only the first files of the directory were looked at." }));
  const table = el("table", { id: "runs" }, el("tr", {}, ...["run", "agent", "model", "input", "bytes", ""].map(h => el("th", { text: h }))));
  for (const r of data.items) {
    const link = el("a", { href: `#/run/${encodeURIComponent(r.name)}`, class: "run-link", text: r.run_id || r.name });
    const replay = data.can_replay ? el("a", { href: `#/replay/${encodeURIComponent(r.name)}`, class: "replay-link", text: "replay" }) : null;
    table.append(el("tr", {},
      el("td", {}, link), el("td", { text: r.agent || "" }), el("td", { text: r.model || "" }),
      el("td", { text: r.problem ? `unreadable: ${r.problem}` : (r.input || "") }),
      el("td", { text: String(r.bytes) }), el("td", {}, replay)));
  }
  main.append(table, pager(data, "#/"));
}

const KINDS = ["command", "model", "effect", "tools", "answer", "error", "cancel", "price", "clock", "end", "run"];

async function showRun(name, query) {
  const offset = Number(query.get("offset") || 0);
  const kinds = query.get("kinds");
  const q = kinds ? `&kinds=${encodeURIComponent(kinds)}` : "";
  const data = await getJson(`/api/runs/${encodeURIComponent(name)}?offset=${offset}&limit=200${q}`);
  const s = data.summary;
  where.textContent = `run ${s.run_id}`;
  main.replaceChildren();
  main.append(el("h1", { text: `Run ${s.run_id}` }));
  main.append(summary([["agent", s.agent], ["model", s.model], ["status", s.status],
    ["steps", s.steps], ["model calls", s.model_calls], ["tool results", s.tool_results],
    ["tripwires", s.tripwires], ["processor retries", s.processor_retries], ["errors", s.errors],
    ["usage", `${s.usage.input_tokens} in / ${s.usage.output_tokens} out tokens`], ["cost", s.cost], ["duration (s)", s.duration === null ? null : Number(s.duration).toFixed(3)], ["entries", s.entries],
    ["processors", s.processors.join(", ")], ["tools", s.tools.join(", ")]]));
  if (data.can_replay) main.append(el("p", {}, el("a", { href: `#/replay/${encodeURIComponent(name)}`, class: "replay-link", text: "Replay against the studio's agent →" })));
  const chosen = new Set(kinds ? kinds.split(",") : KINDS);
  const filters = el("div", { class: "filters" }, "Show: ");
  for (const k of KINDS) {
    const box = el("input", { type: "checkbox", value: k });
    box.checked = chosen.has(k);
    box.addEventListener("change", () => {
      const on = [...filters.querySelectorAll("input:checked")].map(i => i.value);
      location.hash = `#/run/${encodeURIComponent(name)}?kinds=${on.join(",")}`;
    });
    filters.append(el("label", {}, box, k));
  }
  main.append(filters);
  const table = el("table", { id: "timeline", "data-kinds": kinds || "all" }, el("tr", {}, ...["#", "step", "t (s)", "kind", "what"].map(h => el("th", { text: h }))));
  for (const row of data.page.items) {
    const kind = el("span", { class: `kind kind-${row.kind}`, text: row.kind });
    const title = el("span", { class: row.effect ? `effect-${row.effect}` : "", text: row.title });
    table.append(el("tr", { class: `row row-${row.kind}` },
      el("td", { text: String(row.n) }), el("td", { text: row.step >= 0 ? String(row.step) : "" }),
      el("td", { text: (Number(row.at) - Number(s.started_at)).toFixed(3) }), el("td", {}, kind),
      el("td", {}, title, details("details", row.data))));
  }
  main.append(table, pager(data.page, `#/run/${encodeURIComponent(name)}${kinds ? "?kinds=" + encodeURIComponent(kinds) : ""}`));
}

function commandCell(c) {
  if (!c) return el("td", { text: "(none)" });
  return el("td", {}, el("div", { text: c.what }), details(`${c.fields.length} field(s)`, c.fields));
}

async function showReplay(name, query) {
  where.textContent = `replay of ${name}`;
  main.replaceChildren(el("p", { text: "Replaying…" }));
  let offset = query.get("offset");
  let data = await getJson(`/api/runs/${encodeURIComponent(name)}/replay?offset=${offset || 0}&limit=100`);
  if (data.error) { main.replaceChildren(el("p", { class: "error", id: "replay-error", text: data.error })); return; }
  const s = data.summary;
  if (offset === null && s.divergence && s.divergence.index >= 100) {
    data = await getJson(`/api/runs/${encodeURIComponent(name)}/replay?offset=${s.divergence.index - 5}&limit=100`);
  }
  main.replaceChildren();
  main.append(el("h1", { text: `Replay of ${name} against ${data.agent}` }));
  main.append(el("p", { id: "verdict", class: s.identical ? "same" : "error",
    text: s.identical ? "Identical to the recording." : (s.divergence ? `Diverges at ${s.divergence.text}` : "The same commands, but a different result.") }));
  main.append(summary([["recorded status", s.recorded_status], ["replay status", s.replay_status],
    ["new processors", s.new_processors.join(", ") || "none"]]));
  main.append(el("div", { class: "side" },
    el("div", { class: "box" }, el("h3", { text: "The model's recorded output" }), el("pre", { id: "recorded-text", text: s.recorded_model_text })),
    el("div", { class: "box" }, el("h3", { text: "What the replay streamed" }), el("pre", { id: "replay-text", text: s.replay_text }))));
  main.append(el("h2", { text: `What the new processors changed (${s.changes_total}; ${s.continued_total} continued)` }));
  const changes = el("table", { id: "changes" }, el("tr", {}, ...["processor", "hook", "effect", "what"].map(h => el("th", { text: h }))));
  for (const c of s.changes) {
    changes.append(el("tr", {}, el("td", { text: c.processor }), el("td", { text: c.hook }),
      el("td", { class: `effect-${c.effect}`, text: c.effect }), el("td", {}, el("div", { text: c.detail }), details("value", c.value))));
  }
  main.append(changes);
  main.append(el("h2", { text: "Commands, side by side" }));
  const table = el("table", { id: "diff" }, el("tr", {}, ...["#", "recorded", "replay"].map(h => el("th", { text: h }))));
  for (const r of data.page.items) {
    table.append(el("tr", { class: r.diverges ? "diverges" : (r.same ? "same" : "") },
      el("td", { text: String(r.index) }), commandCell(r.recorded), commandCell(r.replay)));
  }
  main.append(table, pager(data.page, `#/replay/${encodeURIComponent(name)}`));
}

async function route() {
  const { parts, query } = parseHash();
  try {
    if (parts[0] === "run" && parts[1]) await showRun(parts[1], query);
    else if (parts[0] === "replay" && parts[1]) await showReplay(parts[1], query);
    else await showRuns(query);
  } catch (e) {
    main.replaceChildren(el("p", { class: "error", text: String(e.message || e) }));
  }
}

window.addEventListener("hashchange", route);
route();

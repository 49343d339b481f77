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

const FILTERS = ["status", "agent", "guard", "thread", "user", "since", "until", "min_steps", "min_cost"];

function when(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const d = new Date(Number(seconds) * 1000);
  return isNaN(d) ? "" : d.toISOString().replace("T", " ").slice(0, 19);
}

function select(name, options, chosen) {
  const box = el("select", { name, id: `filter-${name}` }, el("option", { value: "", text: `any ${name}` }));
  for (const o of options) {
    const opt = el("option", { value: o, text: o });
    if (o === chosen) opt.selected = true;
    box.append(opt);
  }
  return box;
}

function runFilters(data, query) {
  const form = el("form", { id: "run-filters", class: "filters" });
  form.append(select("status", data.facets.status, query.get("status")),
              select("agent", data.facets.agent, query.get("agent")),
              select("guard", data.facets.guard, query.get("guard")));
  for (const [name, label, type] of [["thread", "thread", "text"], ["user", "user", "text"],
      ["since", "started after", "datetime-local"], ["until", "started before", "datetime-local"],
      ["min_steps", "steps ≥", "number"], ["min_cost", "cost ≥", "number"]]) {
    const input = el("input", { name, id: `filter-${name}`, type, placeholder: label, title: label });
    if (type === "number") input.setAttribute("step", "any");
    const v = query.get(name);
    if (v !== null) input.value = type === "datetime-local" ? when(v).replace(" ", "T") : v;
    form.append(el("label", {}, `${label} `, input));
  }
  form.append(el("button", { type: "submit", id: "apply-filters", text: "Filter" }),
              el("a", { href: "#/", id: "clear-filters", text: "clear" }));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const name of FILTERS) {
      const field = form.elements.namedItem(name);
      if (!field || !field.value) continue;
      let v = field.value;
      if (field.type === "datetime-local") v = String(Date.parse(v + "Z") / 1000);
      q.set(name, v);
    }
    location.hash = `#/?${q}`;
  });
  return form;
}

async function showRuns(query) {
  const offset = Number(query.get("offset") || 0);
  const q = new URLSearchParams();
  for (const name of FILTERS) if (query.get(name)) q.set(name, query.get(name));
  const data = await getJson(`/api/runs?offset=${offset}&limit=50&${q}`);
  where.textContent = "runs";
  main.replaceChildren();
  main.append(el("h1", { text: "Recorded runs" }));
  if (data.agent) main.append(el("p", { text: `Replays run against agent ${data.agent}.` }));
  if (data.truncated) main.append(el("p", { class: "error", text: "Only the first files of the directory were looked at." }));
  main.append(runFilters(data, query));
  const heads = ["status", "run", "agent", "thread", "user", "started", "steps", "cost", "guards that acted", "input", ""];
  const table = el("table", { id: "runs", "data-filter": q.toString() || "none" }, el("tr", {}, ...heads.map(h => el("th", { text: h }))));
  for (const r of data.items) {
    const link = el("a", { href: `#/run/${encodeURIComponent(r.name)}`, class: "run-link", text: r.name });
    const first = r.resumed_from ? el("div", { class: "resumed" }, "resumed from ",
      el("a", { href: `#/run/${encodeURIComponent(r.resumed_from)}`, class: "first-part", text: r.resumed_from })) : null;
    const replay = data.can_replay ? el("a", { href: `#/replay/${encodeURIComponent(r.name)}`, class: "replay-link", text: "replay" }) : null;
    const guards = el("td", { class: "guards" });
    for (const g of r.guards || []) guards.append(el("span", { class: "guard", text: g }));
    table.append(el("tr", { class: `run status-${r.status || "unread"}` },
      el("td", {}, el("span", { class: `status status-${r.status || "unread"}`, text: r.status || "?" })),
      el("td", {}, link, first), el("td", { text: r.agent || "" }),
      el("td", { class: "thread", text: r.thread_id || "" }), el("td", { class: "user", text: r.user || "" }),
      el("td", { text: when(r.started_at) }), el("td", { class: "steps", text: r.steps === undefined ? "" : String(r.steps) }),
      el("td", { class: "cost", text: r.cost || "" }), guards,
      el("td", { text: r.problem ? `unreadable: ${r.problem}` : (r.input || "") }),
      el("td", {}, replay)));
  }
  main.append(table, pager(data, `#/?${q}`));
}

const KINDS = ["command", "model", "effect", "tools", "answer", "error", "cancel", "price", "clock", "end", "run"];

function decisionsBox(s) {
  if (!s.decisions || !s.decisions.length) return null;
  const box = el("div", { id: "decisions", class: "box" }, el("h3", { text: "Approvals this run went on with" }));
  for (const d of s.decisions) {
    box.append(el("div", { class: `decision decision-${d.decision}` },
      el("b", { text: d.decision }), ` ${d.tool || ""} (${d.tool_call_id})`,
      d.message ? ` — “${d.message}”` : "", d.reason ? `, reason: ${d.reason}` : "",
      `; decided by ${d.by || "the caller (no user given)"}`));
  }
  return box;
}

function scoresBox(s) {
  if (!s.scores || !s.scores.length) return null;
  const box = el("div", { id: "scores", class: "box" }, el("h3", { text: "Scores (online scorers)" }));
  for (const sc of s.scores) {
    box.append(el("div", { class: `score verdict-${sc.verdict}` }, el("b", { text: sc.scorer }),
      `: ${sc.verdict}${sc.value === null ? "" : " " + Number(sc.value).toFixed(2)}${sc.label ? " [" + sc.label + "]" : ""}`,
      sc.reason ? ` — ${sc.reason}` : ""));
  }
  return box;
}

function highlightsBox(s, name) {
  const box = el("div", { id: "highlights", class: "box" }, el("h3", { text: `What changed the run (${s.highlights.length})` }));
  if (!s.highlights.length) box.append(el("p", { text: "Nothing: every processor let everything pass." }));
  const list = el("ol", {});
  for (const h of s.highlights) {
    list.append(el("li", { class: `why why-${h.why.replace(/\s+/g, "-")}` },
      el("span", { class: "why-label", text: h.why }), " ",
      el("a", { href: `#/run/${encodeURIComponent(name)}?offset=${Math.max(0, h.n - 5)}`, text: `#${h.n}` }),
      ` ${h.step >= 0 ? "step " + h.step + ": " : ""}${h.title}`));
  }
  box.append(list);
  return box;
}

// The runs of a tree (agents calling agents), nested as they called each other.
function treeBox(tree, name) {
  if (!tree || !tree.children || !tree.children.length) return null;
  const node = n => {
    const link = el("a", { href: `#/run/${encodeURIComponent(name)}?offset=${Math.max(0, n.n - 5)}`,
      class: "run-node-link", "data-agent": n.agent, text: `#${n.n}` });
    const li = el("li", {}, el("span", { class: "run-node" },
      el("b", { class: "agent", text: n.agent }), " ", el("span", { class: `status status-${n.status}`, text: n.status }),
      ` ${n.model_calls} model call(s) `, n.path.length ? el("code", { text: n.path.join("/") }) : null, " ", link));
    if (n.children.length) li.append(el("ul", {}, ...n.children.map(node)));
    return li;
  };
  return el("div", { id: "run-tree", class: "box" }, el("h3", { text: "Runs in this tree" }), el("ul", {}, node(tree)));
}

function rowOf(row, s) {
  const kind = el("span", { class: `kind kind-${row.kind}`, text: row.kind });
  const title = el("span", { class: row.effect ? `effect-${row.effect}` : "", text: row.title });
  const child = row.depth ? " child-row" : "";
  const cls = `row row-${row.kind}${row.highlight ? " highlight" : ""}${row.fold ? " folded-row" : ""}${child}`;
  const attrs = { class: cls, "data-n": String(row.n) };
  if (row.depth) Object.assign(attrs, { "data-depth": String(row.depth), "data-agent": row.agent });
  // a child run's row is set in by its depth in the tree and names its agent
  const what = el("td", {},
    row.depth ? el("span", { class: "run-label", text: row.agent }) : null,
    row.highlight ? el("span", { class: "why-label", text: row.highlight }) : null, title, details("details", row.data));
  if (row.depth) what.style.paddingLeft = `${8 + 20 * Math.min(row.depth, 10)}px`;  // (CSSOM: the CSP allows it)
  return el("tr", attrs,
    el("td", { text: String(row.n) }), el("td", { text: row.step >= 0 ? String(row.step) : "" }),
    el("td", { text: (Number(row.at) - Number(s.started_at)).toFixed(3) }), el("td", {}, kind), what);
}

async function showRun(name, query) {
  const offset = Number(query.get("offset") || 0);
  const kinds = query.get("kinds");
  const q = kinds ? `&kinds=${encodeURIComponent(kinds)}` : "";
  const data = await getJson(`/api/runs/${encodeURIComponent(name)}?offset=${offset}&limit=200${q}`);
  const s = data.summary;
  where.textContent = `run ${s.run_id}`;
  main.replaceChildren();
  main.append(el("h1", { text: `Run ${name}` }));
  if (data.resumed_from) main.append(el("p", { id: "resumed-from" }, "Resumed after an approval; its first part: ",
    el("a", { href: `#/run/${encodeURIComponent(data.resumed_from)}`, class: "first-part", text: data.resumed_from })));
  if (data.continued_in && data.continued_in.length) {
    const p = el("p", { id: "continued-in" }, "Went on after an approval in: ");
    for (const c of data.continued_in) p.append(el("a", { href: `#/run/${encodeURIComponent(c)}`, class: "next-part", text: c }), " ");
    main.append(p);
  }
  main.append(summary([["agent", s.agent], ["model", s.model], ["status", s.status],
    ["thread", s.thread_id], ["user", s.user],
    ["steps", s.steps], ["model calls", s.model_calls], ["tool results", s.tool_results],
    ["tripwires", s.tripwires], ["processor retries", s.processor_retries], ["errors", s.errors],
    ["usage", `${s.usage.input_tokens} in / ${s.usage.output_tokens} out tokens`], ["cost", s.cost], ["duration (s)", s.duration === null ? null : Number(s.duration).toFixed(3)], ["entries", s.entries],
    ["processors", s.processors.join(", ")], ["guards that acted", s.guards.join(", ") || "none"], ["tools", s.tools.join(", ")]]));
  if (data.can_replay) main.append(el("p", {}, el("a", { href: `#/replay/${encodeURIComponent(name)}`, class: "replay-link", text: "Replay against the studio's agent →" })));
  const side = el("div", { class: "side" }, highlightsBox(s, name));
  const decided = decisionsBox(s);
  if (decided) side.append(decided);
  const scored = scoresBox(s);
  if (scored) side.append(scored);
  main.append(side);
  const runs = treeBox(s.tree, name);
  if (runs) main.append(runs);
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
  // Clock reads and decisions that let everything pass fold into one row each run of them.
  const items = data.page.items;
  for (let i = 0; i < items.length;) {
    if (!items[i].fold) { table.append(rowOf(items[i], s)); i++; continue; }
    let j = i;
    while (j < items.length && items[j].fold) j++;
    const group = items.slice(i, j);
    const rows = group.map(r => rowOf(r, s));
    for (const r of rows) r.hidden = true;
    const clocks = group.filter(r => r.kind === "clock").length;
    const label = [group.length - clocks ? `${group.length - clocks} pass-through decision(s)` : "", clocks ? `${clocks} clock read(s)` : ""].filter(Boolean).join(", ");
    const toggle = el("button", { type: "button", class: "unfold", text: `▸ ${label}` });
    toggle.addEventListener("click", () => {
      const open = rows[0].hidden;
      for (const r of rows) r.hidden = !open;
      toggle.textContent = `${open ? "▾" : "▸"} ${label}`;
    });
    table.append(el("tr", { class: "fold" }, el("td", { colspan: "5" }, toggle)), ...rows);
    i = j;
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

// --- the playground: chat with the studio's agent -------------------------------------------

let chatId = `chat-${Date.now().toString(36)}`;

function appendTo(box, node) { box.append(node); box.scrollTop = box.scrollHeight; }

async function readStream(response, onPart) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      if (!frame.startsWith("data: ")) continue;
      const body = frame.slice(6);
      if (body === "[DONE]") return;
      onPart(JSON.parse(body));
    }
  }
}

function postJson(url, body) {
  return fetch(url, { method: "POST", headers: { "Content-Type": "application/json", Accept: "text/event-stream" }, body: JSON.stringify(body) });
}

async function play(url, body, log, effects) {
  const response = await postJson(url, body);
  if (!response.ok) {
    let text = response.statusText;
    try { text = (await response.json()).error || text; } catch (e) { /* not JSON */ }
    appendTo(log, el("div", { class: "msg error", text }));
    return;
  }
  let bubble = null;
  const texts = {};
  const calls = {};
  const approvals = [];
  const assistant = () => {
    if (!bubble) { bubble = el("div", { class: "msg assistant" }); appendTo(log, bubble); }
    return bubble;
  };
  await readStream(response, (p) => {
    if (p.type === "text-start") { texts[p.id] = el("span", { class: "text" }); assistant().append(texts[p.id]); }
    else if (p.type === "text-delta") { (texts[p.id] || assistant()).append(document.createTextNode(p.delta)); log.scrollTop = log.scrollHeight; }
    else if (p.type === "tool-input-available") {
      calls[p.toolCallId] = el("div", { class: "call", "data-call": p.toolCallId }, el("b", { text: `${p.toolName}` }), ` ${JSON.stringify(p.input)}`);
      assistant().append(calls[p.toolCallId]);
    } else if (p.type === "tool-output-available") {
      (calls[p.toolCallId] || assistant()).append(el("div", { class: "result", text: `→ ${typeof p.output === "string" ? p.output : JSON.stringify(p.output)}` }));
    } else if (p.type === "tool-output-error" || p.type === "tool-output-denied") {
      (calls[p.toolCallId] || assistant()).append(el("div", { class: "result error", text: p.type === "tool-output-denied" ? "denied" : `error: ${p.errorText}` }));
    } else if (p.type === "tool-approval-request") {
      approvals.push(p);
    } else if (p.type === "tool-approval-response") {
      assistant().append(el("div", { class: "decided", text: `${p.approved ? "approved" : "denied"}${p.reason ? ": " + p.reason : ""}` }));
    } else if (p.type === "error") {
      assistant().append(el("div", { class: "error", text: p.errorText }));
    } else if (p.type === "data-effect") {
      const d = p.data;
      appendTo(effects, el("li", { class: `effect effect-${d.effect}` }, el("b", { text: `${d.processor}.${d.hook}` }), `: ${d.effect}${d.detail ? " (" + d.detail + ")" : ""}`));
    } else if (p.type === "data-run") {
      const d = p.data;
      const link = d.journal ? el("a", { href: `#/run/${encodeURIComponent(d.journal)}`, class: "journal-link", text: "the recorded run" }) : null;
      appendTo(log, el("div", { class: `run-end status-${d.status}` }, `run ${d.status} — `, link));
    }
  });
  for (const a of approvals) appendTo(log, approvalCard(a, calls[a.toolCallId], log, effects));
}

function approvalCard(request, call, log, effects) {
  const what = call ? call.textContent : request.toolCallId;
  const reason = el("input", { type: "text", class: "reason", placeholder: "reason (a denial)" });
  const card = el("div", { class: "approval", "data-approval": request.approvalId },
    el("div", { text: `Waiting for your decision: ${what}` }), reason);
  const decide = async (approved) => {
    for (const b of card.querySelectorAll("button")) b.disabled = true;
    card.classList.add("answered");
    await play("/api/play/decide", { chat: chatId, decisions: [{ id: request.approvalId, approved, reason: reason.value || null }] }, log, effects);
  };
  const yes = el("button", { type: "button", class: "approve", text: "Approve" });
  const no = el("button", { type: "button", class: "deny", text: "Deny" });
  yes.addEventListener("click", () => decide(true));
  no.addEventListener("click", () => decide(false));
  card.append(yes, no);
  return card;
}

async function showPlay() {
  const data = await getJson("/api/runs?limit=1");
  where.textContent = "playground";
  main.replaceChildren();
  if (!data.can_play) {
    main.append(el("p", { class: "error", text: "No agent to chat with: start the studio with --agent module:name." }));
    return;
  }
  main.append(el("h1", { text: `Chat with ${data.agent}` }));
  const log = el("div", { id: "chat-log", class: "box" });
  const effects = el("ol", { id: "effects" });
  const input = el("input", { id: "prompt", type: "text", placeholder: "Say something…", autocomplete: "off" });
  const send = el("button", { id: "send", type: "submit", text: "Send" });
  const fresh = el("button", { id: "new-chat", type: "button", text: "New chat" });
  const form = el("form", { id: "chat-form" }, input, send, fresh);
  fresh.addEventListener("click", () => { chatId = `chat-${Date.now().toString(36)}`; log.replaceChildren(); effects.replaceChildren(); });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const prompt = input.value.trim();
    if (!prompt) return;
    input.value = "";
    send.disabled = true;
    appendTo(log, el("div", { class: "msg user", text: prompt }));
    try { await play("/api/play", { chat: chatId, prompt }, log, effects); }
    catch (e) { appendTo(log, el("div", { class: "msg error", text: String(e.message || e) })); }
    finally { send.disabled = false; }
  });
  main.append(el("div", { class: "play" },
    el("div", {}, log, form),
    el("div", { class: "box" }, el("h3", { text: "Processors, as they decide" }), effects)));
  input.focus();
}

// --- eval reports: what an experiment wrote, one report, two compared ---------------------

function verdictCell(verdict, title) {
  return el("td", { class: `verdict verdict-${verdict.replace(/\s+/g, "-")}`, title: title || "", text: verdict });
}

function runLink(row) {
  return row && row.journal ? el("a", { href: `#/run/${encodeURIComponent(row.journal)}`, class: "case-run", text: "run" }) : null;
}

async function showEvals(query) {
  const offset = Number(query.get("offset") || 0);
  const data = await getJson(`/api/evals?offset=${offset}&limit=50`);
  where.textContent = "evals";
  main.replaceChildren(el("h1", { text: "Eval reports" }));
  if (!data.items.length) {
    main.append(el("p", { id: "no-reports", text: "No eval reports here: write one with report.write(DIR) or pipeline eval --json, into the journals' directory or the one --evals names." }));
    return;
  }
  const table = el("table", { id: "reports" }, el("tr", {}, ...["before", "after", "report", "verdict", "dataset", "agent", "cases passed", "cost", "written"].map(h => el("th", { text: h }))));
  data.items.forEach((r, i) => {
    const pick = (side, checked) => {
      const box = el("input", { type: "radio", name: side, value: r.name, class: `pick-${side}` });
      box.checked = checked;
      box.disabled = r.kind !== "report";
      return box;
    };
    table.append(el("tr", { class: `report ${r.ok ? "ok" : "failed"}` },
      el("td", {}, pick("before", i === 1)), el("td", {}, pick("after", i === 0)),
      el("td", {}, el("a", { href: `#/evals/${encodeURIComponent(r.name)}`, class: "report-link", text: r.name }), r.kind === "comparison" ? " (comparison)" : ""),
      el("td", {}, el("span", { class: `status status-${r.ok ? "finished" : "failed"}`, text: r.ok ? "PASSED" : "FAILED" })),
      el("td", { text: r.dataset }), el("td", { text: r.agent }),
      el("td", { text: `${r.passed} / ${r.cases}` }), el("td", { text: r.cost === null ? "" : `${r.cost} ${r.currency}` }),
      el("td", { text: when(r.modified) })));
  });
  const compare = el("button", { type: "button", id: "compare", text: "Compare before → after" });
  compare.addEventListener("click", () => {
    const before = table.querySelector("input.pick-before:checked");
    const after = table.querySelector("input.pick-after:checked");
    if (before && after) location.hash = `#/evals/${encodeURIComponent(before.value)}/diff/${encodeURIComponent(after.value)}`;
  });
  main.append(table, el("p", {}, compare), pager(data, "#/evals"));
}

function evalHeadline(h) {
  return el("h1", { id: "verdict-line", text: `${h.dataset} on ${h.agent}: ${h.ok ? "PASSED" : "FAILED"}` });
}

async function showReport(name, query) {
  const offset = Number(query.get("offset") || 0);
  const data = await getJson(`/api/evals/${encodeURIComponent(name)}?offset=${offset}&limit=200`);
  if (data.kind === "comparison") { renderDiff(data, `comparison ${name}`, `#/evals/${encodeURIComponent(name)}`); return; }
  where.textContent = `eval ${name}`;
  main.replaceChildren(evalHeadline(data));
  main.append(summary([["experiment", data.experiment], ["cases", `${data.passed} of ${data.page.total} passed`],
    ["cost", data.cost === null ? "unknown" : `${data.cost} ${data.currency}`]]));
  const scorers = el("table", { id: "scorers" }, el("tr", {}, ...["scorer", "passed", "failed", "could not judge", "rate", "threshold", ""].map(h => el("th", { text: h }))));
  for (const s of data.summaries) {
    scorers.append(el("tr", { class: s.ok ? "ok" : "failed" }, el("td", { text: s.scorer }),
      el("td", { text: String(s.passed) }), el("td", { text: String(s.failed) }), el("td", { text: String(s.could_not_judge) }),
      el("td", { text: `${Math.round(s.rate * 100)}%` }), el("td", { text: `${Math.round(s.threshold * 100)}%` }),
      el("td", { text: s.ok ? "ok" : "below threshold" })));
  }
  main.append(scorers);
  if (data.failures.length) {
    const list = el("ul", { id: "failures" });
    for (const f of data.failures) list.append(el("li", { class: "error", text: f }));
    main.append(el("h2", { text: "What fails it" }), list);
  }
  const table = el("table", { id: "cases" }, el("tr", {}, ...["case", "status", "answer", "tools", "cost", ...data.scorers, ""].map(h => el("th", { text: h }))));
  for (const c of data.cases) {
    const byScorer = Object.fromEntries(c.scores.map(s => [s.scorer, s]));
    table.append(el("tr", { class: `case ${c.passed ? "passed" : "failed"}`, "data-case": c.case },
      el("td", { text: c.case }), el("td", {}, el("span", { class: `status status-${c.status.replace(/\s+/g, "-")}`, text: c.status })),
      el("td", {}, el("pre", { text: c.text })), el("td", { text: c.tools.join(", ") }), el("td", { text: c.cost || "" }),
      ...data.scorers.map(n => byScorer[n] ? verdictCell(byScorer[n].verdict, byScorer[n].reason) : el("td", { text: "-" })),
      el("td", {}, runLink(c))));
  }
  main.append(el("h2", { text: "Cases" }), table, pager(data.page, `#/evals/${encodeURIComponent(name)}`));
}

function renderDiff(data, label, base) {
  where.textContent = label;
  main.replaceChildren(el("h1", { id: "diff-line", text: `${data.before.agent} → ${data.after.agent} on ${data.after.dataset}` }));
  main.append(el("p", { id: "diff-counts", class: data.regressed ? "error" : "same",
    text: `${data.changed} of ${data.page.total} case(s) changed, ${data.regressed} regressed` }));
  const scorers = el("table", { id: "scorer-deltas" }, el("tr", {}, ...["scorer", "before", "after"].map(h => el("th", { text: h }))));
  const pct = v => v === null ? "-" : `${Math.round(v * 100)}%`;
  for (const s of data.scorers) scorers.append(el("tr", { class: s.after_ok ? "ok" : "failed" }, el("td", { text: s.scorer }), el("td", { text: pct(s.before) }), el("td", { text: pct(s.after) })));
  main.append(scorers);
  const names = data.cases.length ? data.cases[0].scores.map(v => v.scorer) : [];
  const table = el("table", { id: "case-diff" }, el("tr", {}, ...["case", "", ...names, "before", "after"].map(h => el("th", { text: h }))));
  for (const r of data.cases) {
    const side = (row) => row ? el("td", {}, el("div", { text: row.status }), el("pre", { text: row.text }), runLink(row)) : el("td", { text: "(not in this report)" });
    table.append(el("tr", { class: `case-change${r.regressed ? " regressed" : r.changed ? " changed" : " same"}`, "data-case": r.case },
      el("td", {}, el("div", { text: r.case }), r.divergence ? el("div", { class: "resumed", text: `diverges at ${r.divergence}` }) : null),
      el("td", { text: r.regressed ? "regressed" : r.changed ? "changed" : "same" }),
      ...r.scores.map(v => {
        const cell = verdictCell(v.after);
        if (v.before !== v.after) { cell.textContent = `${v.before} → ${v.after}`; cell.classList.add("verdict-changed"); }
        return cell;
      }),
      side(r.before), side(r.after)));
  }
  main.append(table, pager(data.page, base));
}

async function showDiff(before, after, query) {
  const offset = Number(query.get("offset") || 0);
  const data = await getJson(`/api/evals/${encodeURIComponent(before)}/diff/${encodeURIComponent(after)}?offset=${offset}&limit=200`);
  renderDiff(data, `${before} → ${after}`, `#/evals/${encodeURIComponent(before)}/diff/${encodeURIComponent(after)}`);
}

async function showApprovals(query) {
  const offset = Number(query.get("offset") || 0);
  const data = await getJson(`/api/approvals?offset=${offset}&limit=50`);
  where.textContent = "approvals";
  main.replaceChildren(el("h1", { text: "Approvals: every wait and decision" }));
  if (!data.kept) {
    main.append(el("p", { text: "No approval store: start the studio with --approvals URL (or --agent, for the playground's)." }));
    return;
  }
  const heads = ["#", "at", "run", "thread", "user", "tool", "call", "outcome", "decided by", "reason", "digest"];
  const table = el("table", { id: "audit" }, el("tr", {}, ...heads.map(h => el("th", { text: h }))));
  for (const r of data.items) {
    table.append(el("tr", { class: `audit outcome-${r.outcome.replace(" ", "-")}` },
      el("td", { text: String(r.seq) }), el("td", { text: when(r.at) }), el("td", { text: r.run_id }),
      el("td", { text: r.thread_id || "" }), el("td", { text: r.resource_id || "" }),
      el("td", { text: r.tool_name }), el("td", { text: r.tool_call_id }),
      el("td", { class: "outcome", text: r.outcome }), el("td", { class: "decided-by", text: r.decided_by }),
      el("td", { text: r.reason }), el("td", { class: "digest", text: r.digest.slice(0, 12) })));
  }
  main.append(table, pager(data, "#/approvals?"));
}

async function route() {
  const { parts, query } = parseHash();
  try {
    if (parts[0] === "approvals") await showApprovals(query);
    else if (parts[0] === "run" && parts[1]) await showRun(parts[1], query);
    else if (parts[0] === "replay" && parts[1]) await showReplay(parts[1], query);
    else if (parts[0] === "play") await showPlay();
    else if (parts[0] === "evals" && parts[1] && parts[2] === "diff" && parts[3]) await showDiff(parts[1], parts[3], query);
    else if (parts[0] === "evals" && parts[1]) await showReport(parts[1], query);
    else if (parts[0] === "evals") await showEvals(query);
    else await showRuns(query);
  } catch (e) {
    main.replaceChildren(el("p", { class: "error", text: String(e.message || e) }));
  }
}

window.addEventListener("hashchange", route);
route();

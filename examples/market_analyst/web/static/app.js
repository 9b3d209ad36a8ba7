// The Market Analyst page: plain JavaScript, no build step.
//
// Everything a person or a model wrote (requests, tool arguments, reasons, search
// passages) is put on the page with textContent, never as HTML. The only HTML taken
// from the server is the draft and the reports rendered from Markdown by markdown-it
// with raw HTML turned off (see views.py): tags in them arrive escaped.
"use strict";

const $ = (id) => document.getElementById(id);
const KINDS = [
  ["input_tokens", "uncached input"],
  ["cache_read_tokens", "cache read"],
  ["cache_write_tokens", "cache write"],
  ["output_tokens", "output"],
];

const PROFILE_FIELDS = [
  "risk_tolerance", "horizon", "holdings_text", "preferences",
  "auto_approve_usd", "hard_limit_usd", "trade_tickers_text",
];
const NUMBERS = new Set(["auto_approve_usd", "hard_limit_usd"]);

let current = null; // the run shown: {id, source, record, usage, calls, tools, t0}
let me = "";
let command = ""; // this example's command line, as the server would run it

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function show(node, visible) {
  node.hidden = !visible;
}

function say(node, text, kind) {
  node.textContent = text || "";
  node.className = "message" + (kind ? " " + kind : "");
  show(node, Boolean(text));
}

async function api(path, options = {}) {
  const init = { ...options, headers: { Accept: "application/json" } };
  if (options.body !== undefined) {
    init.body = JSON.stringify(options.body);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(path, init);
  let data = {};
  try {
    data = await response.json();
  } catch (_) {
    data = { error: `${response.status} ${response.statusText}` };
  }
  return { ok: response.ok, status: response.status, data };
}

function args(values) {
  return Object.entries(values || {})
    .map(([k, v]) => (k === "ticker" ? String(v) : `${k}=${JSON.stringify(v)}`))
    .join(" ");
}

function fmt(n) {
  return Number(n || 0).toLocaleString("en-US");
}

// -- one run ----------------------------------------------------------------------

async function openRun(runId) {
  if (current && current.source) current.source.close();
  current = { id: runId, source: null, record: null, usage: {}, calls: 0, tools: new Map(), t0: 0 };
  show($("report"), false);
  show($("run"), true);
  for (const id of ["decision", "run-error"]) say($(id), "");
  $("run-id").textContent = runId;
  $("run-request").textContent = "";
  $("route").textContent = "deciding…";
  $("route").className = "big muted";
  $("route-why").textContent = "";
  $("verdict").textContent = "waiting for the draft";
  $("verdict").className = "big muted";
  $("reasons").replaceChildren();
  $("plan").tBodies[0].replaceChildren();
  $("plan-note").textContent = "";
  $("timeline").replaceChildren();
  show($("axis"), false);
  show($("model-live"), false);
  $("model-text").replaceChildren();
  $("timeline-note").textContent = "";
  $("draft").textContent = "The draft appears when the research is done.";
  $("draft").className = "markdown muted";
  show($("decide"), false);
  show($("editor"), false);
  show($("trade"), false);
  say($("trade-message"), "");
  renderTokens({}, 0);
  const { ok, data } = await api(`/api/runs/${encodeURIComponent(runId)}`);
  if (!ok) {
    say($("run-error"), data.error, "error");
    setStatus("unknown");
    return;
  }
  renderRecord(data);
  if (data.live || data.lease) {  // here, or elsewhere: the server replays its journal
    follow(runId);
  } else {
    showRecordedCalls(data);
  }
}

function renderRecord(run) {
  current.record = run;
  $("run-request").textContent = run.request;
  const elsewhere = run.lease && !run.running_here;
  setStatus(run.error && run.status === "running" && !run.running_here && !elsewhere
    ? "stopped" : run.status);
  if (run.route) showRoute(run.route, run.loop, run.route_reasoning);
  if (run.draft_html) showDraft(run.draft_html);
  if (run.verdict) showVerdict(run.verdict);
  if (run.usage && Object.keys(run.usage).length) {
    const calls = Object.values(run.calls_by_role || {}).reduce((a, b) => a + b, 0);
    renderTokens(run.usage, calls);
  }
  if (elsewhere) {
    say($("run-error"), `Held by ${run.lease.holder} until ${clock(run.lease.until)}: ` +
      "another process is working on this run.", "error");
  } else if (run.error && run.status === "running") {
    say($("run-error"), `Stopped: ${run.error}. Continue it with: ` +
      `${command} --resume ${run.run_id}`, "error");
  }
  const decided = run.decision;
  show($("decide"), run.status === "pending");
  if (run.status !== "pending") show($("editor"), false);
  renderTrade(run);
  if (decided && !$("decision").textContent) {
    const edited = decided.edited ? ", with edits" : "";
    say($("decision"), `${run.status === "published" ? "Published" : "Rejected"} by ` +
      `${decided.by} (${decided.via}${edited}) at ${decided.at}.`, "done");
  }
}

function setStatus(status) {
  const badge = $("run-status");
  badge.textContent = status;
  badge.className = `badge ${status}`;
}

function showRoute(route, loop, why) {
  $("route").textContent = route;
  $("route").append(el("span", loop, "loop"));
  $("route").className = "big";
  $("route-why").textContent = why || "";
}

function showDraft(html) {
  // Rendered by the server from Markdown with raw HTML off: see the note at the top.
  $("draft").innerHTML = html;
  $("draft").className = "markdown";
}

function showVerdict(verdict) {
  $("verdict").textContent = verdict.verdict;
  $("verdict").className = `big verdict ${verdict.verdict}`;
  $("reasons").replaceChildren(...(verdict.reasons || []).map((r) => el("li", r)));
}

function renderTokens(usage, calls) {
  const total = KINDS.reduce((sum, [key]) => sum + (usage[key] || 0), 0);
  const rows = [];
  const bar = [];
  KINDS.forEach(([key, label], i) => {
    const value = usage[key] || 0;
    const dt = el("dt");
    dt.append(el("span", "", `swatch k${i}`), label);
    rows.push(dt, el("dd", fmt(value)));
    const part = el("span", "", `k${i}`);
    part.style.width = total ? `${(100 * value) / total}%` : "0";
    bar.push(part);
  });
  $("tokens").replaceChildren(...rows);
  $("tokbar").replaceChildren(...bar);
  $("calls").textContent = calls ? `${calls} model call${calls === 1 ? "" : "s"}` : "";
}

// -- the live feed --------------------------------------------------------------------

function follow(runId) {
  const source = new EventSource(`/api/runs/${encodeURIComponent(runId)}/events`);
  current.source = source;
  $("timeline-note").textContent = "live";
  source.onmessage = (message) => {
    if (!current || current.id !== runId) return source.close();
    apply(JSON.parse(message.data));
  };
}

function apply(item) {
  if (item.kind === "tool") return toolItem(item);
  if (item.kind === "thinking") return thinking(item);
  if (item.kind === "text") return streamed(item);
  if (item.kind === "model") {
    for (const [key] of KINDS) current.usage[key] = (current.usage[key] || 0) + (item.usage[key] || 0);
    current.calls += 1;
    answered(item);
    return renderTokens(current.usage, current.calls);
  }
  if (item.kind === "plan") return showPlan(item.loop, item.steps);
  if (item.kind === "step") return stepItem(item);
  if (item.kind === "replan") {
    $("plan-note").textContent = `revised: ${(item.notes || []).join("; ")}`;
    return;
  }
  if (item.kind === "stage") {
    if (item.stage === "route") {
      const loop = item.route === "flash_briefing" ? "ReWOO" : "Plan-and-Execute";
      return showRoute(item.route, loop, item.route_reasoning);
    }
    if (item.stage === "draft") return showDraft(item.draft_html);
    if (item.stage === "verdict") return showVerdict(item.verdict);
    return;
  }
  if (item.kind === "end") return finished(item);
}

async function finished(item) {
  const runId = current.id;
  if (current.source) current.source.close();
  current.source = null;
  show($("model-live"), false);
  $("timeline-note").textContent = "";
  layoutTimeline();
  const { ok, data } = await api(`/api/runs/${encodeURIComponent(runId)}`);
  if (ok && current && current.id === runId) renderRecord(data);
  if (item.error && current && current.id === runId) say($("run-error"), item.error, "error");
  refreshRuns();
}

// -- a model call as it happens: who is thinking, then what it writes -----------------------

function thinking(item) {
  show($("model-live"), true);
  $("model-live").classList.add("active");
  $("thinking-role").textContent = item.role;
  $("thinking-state").textContent = "is thinking…";
  $("model-text").replaceChildren();
}

function streamed(item) {
  // Text, never HTML: the model's words, reasoning and tool-call arguments as written.
  $("thinking-role").textContent = item.role;
  $("thinking-state").textContent = item.part === "thinking" ? "is reasoning…" : "is writing…";
  const box = $("model-text");
  const last = box.lastElementChild;
  if (last && last.dataset.part === item.part) {
    last.append(item.text);
  } else {
    const piece = el("span", item.text, `part-${item.part}`);
    piece.dataset.part = item.part;
    box.append(piece);
  }
  box.scrollTop = box.scrollHeight;
}

function answered(item) {
  $("model-live").classList.remove("active");
  $("thinking-state").textContent = `answered in ${item.seconds.toFixed(2)} s`;
}

function showPlan(loop, steps) {
  const body = $("plan").tBodies[0];
  body.replaceChildren();
  for (const step of steps) {
    const row = el("tr");
    row.dataset.step = step.id;
    row.append(el("td", step.id, "mono"));
    if (loop === "rewoo") {
      row.append(el("td", `${step.tool} ${args(step.args)}`, "mono"));
      row.append(el("td", step.after.length ? `after ${step.after.join(", ")}` : "at once", "small"));
    } else {
      row.append(el("td", step.description));
      row.append(el("td", step.tool ? step.tool : "", "small mono"));
    }
    body.append(row);
  }
  $("plan-note").textContent =
    loop === "rewoo" ? "ReWOO: every tool call decided up front" : "Plan-and-Execute: one ReAct loop per step";
}

function stepItem(item) {
  let row = document.querySelector(`#plan tr[data-step="${CSS.escape(item.id)}"]`);
  if (!row && item.phase === "start") {
    row = el("tr");
    row.dataset.step = item.id;
    row.append(el("td", item.id, "mono"), el("td", item.description), el("td", "", "small"));
    $("plan").tBodies[0].append(row);
  }
  if (!row) return;
  row.className = item.phase === "start" ? "active" : item.ok ? "done" : "failed";
  if (item.phase === "start") row.cells[1].textContent = item.description;
}

// -- the time line: one row per tool call, a bar from its start to its finish ------------

function toolItem(item) {
  let call = current.tools.get(item.key);
  if (!call) {
    if (!current.tools.size) current.t0 = item.t;
    const label = el("div", "", "tl-label");
    const id = item.step ? `${item.step} ·` : item.call_id.startsWith("#") ? item.call_id : "";
    if (id) label.append(el("span", id, "mono muted"), " ");
    label.append(el("span", item.name), " ", el("span", args(item.args), "muted"));
    const bar = el("div", "", "tl-bar running");
    const track = el("div", "", "tl-track");
    track.append(bar);
    const row = el("div", "", "tl-row");
    row.dataset.key = item.key;
    row.dataset.name = item.name;
    row.append(label, track, el("div", "", "tl-time"));
    $("timeline").append(row);
    call = { row, bar, start: item.phase === "start" ? item.t : null, end: null };
    current.tools.set(item.key, call);
  }
  if (item.phase === "start") {
    call.start = item.t;
    call.row.dataset.start = item.t;
  } else {
    call.end = item.t;
    call.row.dataset.end = item.t;
    call.bar.className = item.error ? "tl-bar error" : "tl-bar";
    call.row.title = item.preview;
  }
  layoutTimeline();
}

function layoutTimeline() {
  if (!current || !current.tools.size) return;
  const calls = [...current.tools.values()];
  const starts = calls.map((c) => c.start ?? c.end);
  const t0 = Math.min(...starts);
  const t1 = Math.max(...calls.map((c) => c.end ?? c.start ?? t0), t0 + 0.05);
  const span = t1 - t0;
  for (const c of calls) {
    const start = c.start ?? t0;
    const end = c.end ?? t1;
    c.bar.style.left = `${(100 * (start - t0)) / span}%`;
    c.bar.style.width = `${Math.max(0.6, (100 * (end - start)) / span)}%`;
    const time = c.row.querySelector(".tl-time");
    time.textContent = c.end === null ? `${start.toFixed(2)} s →` : `${start.toFixed(2)}–${end.toFixed(2)} s`;
  }
  $("timeline-note").textContent =
    `${calls.length} call${calls.length === 1 ? "" : "s"}, ${span.toFixed(2)} s from the first start` +
    (current.source ? " · live" : "");
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const tick = el("span", `${(t0 + f * span).toFixed(2)} s`);
    tick.style.left = `${100 * f}%`;
    return tick;
  });
  document.querySelector("#axis .tl-ticks").replaceChildren(...ticks);
  show($("axis"), true);
}

function showRecordedCalls(run) {
  if (!run.evidence.length) return;
  $("timeline-note").textContent =
    "as recorded (the live time line is shown for runs started in this server)";
  const rows = run.evidence.map((e, i) => {
    const row = el("div", "", "tl-row recorded");
    const label = el("div", "", "tl-label");
    label.append(el("span", `E${i + 1}`, "mono muted"), " ", el("span", e.name), " ",
      el("span", args(e.args), "muted"));
    row.append(label, el("div", e.error ? "failed" : "done", e.error ? "small bad" : "small"));
    return row;
  });
  $("timeline").replaceChildren(...rows);
}

// -- deciding -----------------------------------------------------------------------------

async function decide(action, markdown) {
  const runId = current.id;
  const by = $("by").value.trim() || me;
  const { ok, data } = await api(`/api/runs/${encodeURIComponent(runId)}/decision`, {
    method: "POST",
    body: { action, markdown, by },
  });
  if (!current || current.id !== runId) return;
  if (ok) {
    say($("decision"), [data.message, ...(data.notes || [])].join(" "), "done");
  } else {
    say($("decision"), data.error, "error refused");
  }
  if (data.run) renderRecord(data.run);
  refreshRuns();
  refreshReports();
}

// -- the trade an approved report may lead to (simulated) ---------------------------------

function renderTrade(run) {
  const trade = run.trade;
  show($("trade"), Boolean(trade) || run.tradable);
  show($("trade-offer"), !trade && run.tradable);
  show($("trade-card"), Boolean(trade));
  if (!trade) {
    if (run.tradable) {
      $("trade-why").textContent =
        `The published report recommends ${String(run.recommendation).toUpperCase()}. The agent may ` +
        "propose one trade: the trade guardian lets a small one through, asks you about a " +
        "larger one, and refuses one over the hard limit or outside your profile.";
    }
    return;
  }
  $("trade-status").textContent = trade.status;
  $("trade-status").className = `badge ${trade.status}`;
  $("trade-id").textContent = trade.trade_id;
  $("trade-summary").textContent = trade.summary;
  const reasons = trade.calls.flatMap((c) => c.reasons || []);
  $("trade-reasons").replaceChildren(...reasons.map((r) => el("li", `Refused: ${r}`)));
  const entry = trade.ledger_entry;
  $("trade-ledger").textContent = entry
    ? `Ledger: ${entry.side} ${entry.quantity} ${entry.ticker} at ${entry.price} USD, approved by ` +
      `${entry.approved_by} (${entry.via}) at ${entry.at}.`
    : trade.decision
      ? `${trade.decision.approved ? "Approved" : "Denied"} by ${trade.decision.by} ` +
        `(${trade.decision.via}) at ${trade.decision.at}; nothing in the ledger.`
      : "";
  $("trade-answer").textContent = trade.answer ? `Agent: ${trade.answer}` : trade.error || "";
  show($("trade-decide"), trade.status === "waiting");
}

async function proposeTrade() {
  const runId = current.id;
  const raw = $("trade-budget").value.trim();
  $("propose-trade").disabled = true;
  try {
    const { ok, data } = await api(`/api/runs/${encodeURIComponent(runId)}/trade`, {
      method: "POST",
      body: { budget_usd: raw === "" ? null : Number(raw), by: $("by").value.trim() || me },
    });
    if (!current || current.id !== runId) return;
    say($("trade-message"), ok ? data.message : data.error, ok ? "done" : "error refused");
    await reloadRun(runId);
    refreshTrades();
  } finally {
    $("propose-trade").disabled = false;
  }
}

async function decideTrade(action) {
  const runId = current.id;
  const tradeId = current.record.trade.trade_id;
  const { ok, data } = await api(`/api/trades/${encodeURIComponent(tradeId)}/decision`, {
    method: "POST",
    body: { action, by: $("by").value.trim() || me },
  });
  if (!current || current.id !== runId) return;
  say($("trade-message"), ok ? data.message : data.error, ok ? "done" : "error refused");
  await reloadRun(runId);
  refreshTrades();
}

async function reloadRun(runId) {
  const { ok, data } = await api(`/api/runs/${encodeURIComponent(runId)}`);
  if (ok && current && current.id === runId) renderRecord(data);
}

async function refreshTrades() {
  const { ok, data } = await api("/api/trades");
  if (!ok) return;
  const items = data.waiting.map((t) => {
    const item = el("li");
    const link = el("a", "", "run-link");
    link.href = `#run=${encodeURIComponent(t.run_id)}`;
    link.append(el("span", t.summary, "title"));
    const meta = el("span", "", "meta");
    meta.append(el("span", t.trade_id, "mono"), " ", el("span", "waiting", "badge small waiting"));
    link.append(meta);
    item.append(link);
    return item;
  });
  $("trades").replaceChildren(...(items.length ? items : [el("li", "none", "muted")]));
}

// -- lists, archive, profile -------------------------------------------------------------------

function clock(iso) {
  // A lease's expiry, as this browser's local time of day.
  return new Date(iso).toLocaleTimeString();
}

function runLink(run) {
  const item = el("li");
  const link = el("a", "", "run-link");
  link.href = `#run=${encodeURIComponent(run.run_id)}`;
  link.append(el("span", run.request, "title"));
  const meta = el("span", "", "meta");
  meta.append(el("span", run.run_id, "mono"));
  if (run.verdict) meta.append(" ", el("span", run.verdict, `badge small ${run.verdict}`));
  if (run.status === "running") {
    const busy = run.live || run.lease;
    const state = run.live ? "running here" : run.lease ? "running elsewhere"
      : run.error ? "stopped" : "not finished";
    const badge = el("span", state, `badge small ${busy ? "running" : "stopped"}`);
    if (run.lease) badge.title = `held by ${run.lease.holder} until ${clock(run.lease.until)}`;
    meta.append(" ", badge);
  }
  link.append(meta);
  item.append(link);
  return item;
}

async function refreshRuns() {
  const { ok, data } = await api("/api/runs");
  if (!ok) return;
  const fill = (id, runs, empty) =>
    $(id).replaceChildren(...(runs.length ? runs.map(runLink) : [el("li", empty, "muted")]));
  fill("pending", data.pending, "none");
  fill("running", data.running, "none");
}

function marked(snippet) {
  // The archive marks matches «like this»: split on the marks, never parse HTML.
  const out = el("span", "", "snippet");
  snippet.split(/(«[^»]*»)/).forEach((part) => {
    if (part.startsWith("«") && part.endsWith("»")) out.append(el("mark", part.slice(1, -1)));
    else if (part) out.append(part);
  });
  return out;
}

async function refreshReports(query) {
  const q = query === undefined ? $("q").value.trim() : query;
  const { ok, data } = await api(`/api/reports?q=${encodeURIComponent(q)}`);
  if (!ok) return;
  const items = data.reports.map((r) => {
    const item = el("li");
    const link = el("a", "", "run-link");
    link.href = `#report=${encodeURIComponent(r.run_id)}`;
    link.append(el("span", r.title, "title"));
    const meta = el("span", "", "meta");
    meta.append(el("span", r.recommendation.toUpperCase(), `rec ${r.recommendation}`), " ",
      el("span", r.published.slice(0, 10)), " ", el("span", r.run_id, "mono"));
    link.append(meta);
    if (r.snippet) link.append(marked(r.snippet));
    item.append(link);
    return item;
  });
  const empty = q ? `No published report matches “${q}”.` : "No published reports yet.";
  $("reports").replaceChildren(...(items.length ? items : [el("li", empty, "muted")]));
}

async function openReport(runId) {
  if (current && current.source) current.source.close();
  current = null;
  const { ok, data } = await api(`/api/reports/${encodeURIComponent(runId)}`);
  show($("run"), false);
  show($("report"), true);
  if (!ok) {
    $("report-title").textContent = "Not found";
    $("report-meta").textContent = data.error;
    $("report-body").replaceChildren();
    return;
  }
  $("report-title").textContent = data.title;
  $("report-meta").textContent =
    `${data.run_id} · ${data.recommendation} · approved by ${data.decided_by} · ${data.published}`;
  $("report-body").innerHTML = data.html; // rendered with raw HTML off, as the draft
}

async function loadProfile() {
  const { ok, data } = await api("/api/profile");
  if (!ok) return;
  for (const key of PROFILE_FIELDS) $(key).value = data[key];
}

async function saveProfile(event) {
  event.preventDefault();
  const body = {};
  for (const key of PROFILE_FIELDS) body[key] = NUMBERS.has(key) ? Number($(key).value) : $(key).value;
  const { ok, data } = await api("/api/profile", { method: "PUT", body });
  if (ok) {
    for (const key of PROFILE_FIELDS) $(key).value = data[key];
    say($("profile-message"), "Saved. New runs use it.", "done");
  } else {
    say($("profile-message"), data.error, "error");
  }
}

// -- wiring ---------------------------------------------------------------------------------

function route() {
  const hash = decodeURIComponent(location.hash.slice(1));
  if (hash.startsWith("run=")) openRun(hash.slice(4));
  else if (hash.startsWith("report=")) openReport(hash.slice(7));
}

async function start(event) {
  event.preventDefault();
  say($("ask-error"), "");
  $("run-button").disabled = true;
  try {
    const { ok, data } = await api("/api/runs", {
      method: "POST",
      body: { request: $("request").value, mode: $("mode").value },
    });
    if (!ok) return say($("ask-error"), data.error, "error");
    const hash = `#run=${encodeURIComponent(data.run_id)}`;
    if (location.hash === hash) openRun(data.run_id);
    else location.hash = hash;
    refreshRuns();
  } finally {
    $("run-button").disabled = false;
  }
}

async function init() {
  const { data: info } = await api("/api/info");
  $("model").textContent = `model: ${info.model}`;
  $("model").title = info.banner || "";
  $("model").className = info.offline ? "model offline" : "model";
  $("notice").textContent = info.notice;
  me = info.user;
  command = info.command;
  $("by").value = localStorage.getItem("analyst-by") || me;
  $("by").addEventListener("change", () => localStorage.setItem("analyst-by", $("by").value.trim()));
  $("ask").addEventListener("submit", start);
  $("approve").addEventListener("click", () => decide("approve"));
  $("edit").addEventListener("click", () => {
    $("edit-text").value = current.record.draft || "";
    show($("decide"), false);
    show($("editor"), true);
    $("edit-text").focus();
  });
  $("cancel-edit").addEventListener("click", () => {
    show($("editor"), false);
    show($("decide"), true);
  });
  $("publish-edit").addEventListener("click", () => decide("edit", $("edit-text").value));
  $("reject").addEventListener("click", () => {
    if (confirm(`Reject ${current.id} for good? It can never be published.`)) decide("reject");
  });
  $("close-report").addEventListener("click", () => {
    show($("report"), false);
    history.replaceState(null, "", location.pathname);
  });
  $("search").addEventListener("submit", (event) => {
    event.preventDefault();
    refreshReports();
  });
  $("profile").addEventListener("submit", saveProfile);
  $("propose-trade").addEventListener("click", proposeTrade);
  $("approve-trade").addEventListener("click", () => decideTrade("approve"));
  $("deny-trade").addEventListener("click", () => decideTrade("deny"));
  window.addEventListener("hashchange", route);
  await Promise.all([refreshRuns(), refreshReports(""), loadProfile(), refreshTrades()]);
  setInterval(() => { refreshRuns(); refreshTrades(); }, 5000); // changes made elsewhere
  route();
  document.body.dataset.ready = "1";
}

init();

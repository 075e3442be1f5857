// The council web app: reads the server's API with fetch (the bearer token goes along) and
// builds every element with the DOM; text from the server is only ever inserted as text.
"use strict";

const TOKEN_KEY = "council-token";
const $ = (id) => document.getElementById(id);

// el("div", {class: "x"}, "text", child...): strings become text nodes, never markup.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

// -- the API ---------------------------------------------------------------------------
function headers(extra) {
  const h = Object.assign({}, extra || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) h.authorization = "Bearer " + token;
  return h;
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const reply = await fetch(path, opts);
  if (reply.status === 401) {
    $("token-form").hidden = false;
    throw new Error("This server needs its bearer token: enter it above.");
  }
  const body = await reply.json().catch(() => null);
  if (!reply.ok) {
    const message = body && body.error && body.error.message ? body.error.message : "HTTP " + reply.status;
    throw new Error(message);
  }
  return body;
}

// Server-sent events read with fetch (EventSource cannot send the bearer header). Resumes
// with Last-Event-ID after a dropped connection; ends after session_finished.
async function followEvents(sessionId, onEvent, isCurrent) {
  let lastId = null;
  for (let attempt = 0; attempt < 20 && isCurrent(); attempt++) {
    const extra = { accept: "text/event-stream" };
    if (lastId !== null) extra["last-event-id"] = String(lastId);
    let reply;
    try {
      reply = await fetch("/v1/sessions/" + encodeURIComponent(sessionId) + "/events", { headers: headers(extra) });
    } catch (err) {
      await sleep(1000);
      continue;
    }
    if (!reply.ok) {
      const body = await reply.json().catch(() => null);
      throw new Error(body && body.error ? body.error.message : "HTTP " + reply.status);
    }
    const reader = reply.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done || !isCurrent()) break;
        buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const parsed = parseBlock(block);
          if (!parsed) continue;
          if (parsed.id !== null) lastId = parsed.id;
          onEvent(parsed.data);
          if (parsed.data.type === "session_finished") return;
        }
      }
    } catch (err) {
      // connection dropped: resume below
    } finally {
      reader.cancel().catch(() => {}); // another view now, or done: close the connection
    }
    if (!isCurrent()) return;
    await sleep(500);
  }
}

function parseBlock(block) {
  let id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "id") id = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return null;
  try {
    return { id: id, data: JSON.parse(data.join("\n")) };
  } catch (err) {
    return null;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function fmt(value, digits) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "number") {
    if (digits !== undefined) return value.toFixed(digits);
    return Number.isInteger(value) ? String(value) : value.toFixed(2);
  }
  return String(value);
}

// -- the session's state, from live events or from a stored result -----------------------
function emptySession(id) {
  return {
    id: id, question: null, council: null, status: "running", members: [], models: {},
    answers: {}, reviews: [], consensus: null, synthesis: { text: "", chairman: null, status: null, error: null },
    notices: [], stage: null, tab: null, error: null,
  };
}

function applyEvent(s, e) {
  switch (e.type) {
    case "session_started":
      s.question = e.question; s.council = e.council; s.members = e.members; s.models = e.models || {};
      break;
    case "stage":
      s.stage = e.stage;
      break;
    case "answer":
      s.answers[e.member] = { member: e.member, model: e.model, status: e.status, text: e.text, error: e.error, length: e.length_chars };
      if (!s.tab) s.tab = e.member;
      break;
    case "review":
      s.reviews.push({ reviewer: e.reviewer, model: e.model, valid: e.status === "ok", order: e.order, labels: e.labels,
        scores: e.scores || {}, reasoning: e.reasoning || {}, ranking: e.ranking || [], error: e.error });
      break;
    case "consensus":
      s.consensus = { table: e.table, kendall_w: e.kendall_w, p: e.p, ballots: e.ballots };
      break;
    case "synthesis_delta":
      if (s.synthesis.chairman !== e.chairman && s.synthesis.text) s.synthesis.text += "\n\n";
      s.synthesis.chairman = e.chairman;
      s.synthesis.text += e.text;
      break;
    case "synthesis":
      s.synthesis.status = e.status; s.synthesis.error = e.error;
      if (e.text) s.synthesis.text = e.text;
      if (e.chairman) s.synthesis.chairman = e.chairman;
      break;
    case "notice":
      s.notices.push(e.text);
      break;
    case "session_finished":
      s.status = e.status; s.error = e.error;
      break;
  }
}

function fromResult(id, r) {
  const s = emptySession(id);
  s.question = r.question; s.council = r.council; s.status = r.status; s.members = r.members || [];
  s.models = r.models || {};
  for (const a of r.answers || []) {
    s.answers[a.member] = { member: a.member, model: a.model, status: a.status, text: a.text, error: a.error, length: a.length_chars };
  }
  s.tab = s.members.find((m) => s.answers[m]) || null;
  s.reviews = (r.reviews || []).map((v) => ({ reviewer: v.reviewer, model: v.model, valid: v.valid, order: v.display_order,
    labels: v.labels, scores: v.scores || {}, reasoning: v.reasoning || {}, ranking: v.ranking || [], error: v.error }));
  if (r.consensus) {
    s.consensus = { table: r.consensus.ranking, kendall_w: r.consensus.kendall_w, p: r.consensus.kendall_w_p_value, ballots: r.consensus.ballots };
  }
  const y = r.synthesis || {};
  s.synthesis = { text: y.text || "", chairman: y.chairman, status: y.status, error: y.error };
  s.notices = (r.flags || []).concat(r.partial_reasons || []);
  s.error = r.error || null;
  return s;
}

// -- views ----------------------------------------------------------------------------------
let viewToken = 0; // a newer view makes older streams stop

function route() {
  viewToken++;
  showError("");
  const hash = location.hash || "#/";
  const main = $("main");
  main.replaceChildren();
  if (hash.startsWith("#/session/")) return sessionView(main, decodeURIComponent(hash.slice("#/session/".length)));
  if (hash === "#/leaderboard") return reportView(main, "Leaderboard", "/v1/leaderboard");
  if (hash === "#/bias") return reportView(main, "Bias report", "/v1/bias-report");
  return homeView(main);
}

async function homeView(main) {
  const councilSelect = el("select", { id: "ask-council", name: "council", required: true });
  const question = el("textarea", { id: "ask-question", name: "question", rows: 3, required: true,
    placeholder: "Ask the council a question" });
  const seed = el("input", { id: "ask-seed", name: "seed", type: "number", min: 0, placeholder: "seed (optional)" });
  const form = el("form", { id: "ask", class: "card ask", onsubmit: (ev) => { ev.preventDefault(); ask(councilSelect, question, seed, () => loadSessions(list, search.value)); } },
    el("h2", {}, "Ask a council"),
    el("label", { for: "ask-question" }, "Question"), question,
    el("div", { class: "row" },
      el("label", { for: "ask-council", class: "inline" }, "Council"), councilSelect, seed,
      el("button", { type: "submit", id: "ask-submit" }, "Ask")));
  const search = el("input", { id: "search", type: "search", placeholder: "Search questions" });
  const list = el("div", { id: "sessions" });
  main.append(form, el("section", { class: "card" }, el("h2", {}, "Recent sessions"), search, list));
  let timer = null;
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => loadSessions(list, search.value), 200); });
  try {
    const models = await api("/v1/models");
    for (const m of models.data) councilSelect.append(el("option", { value: m.id }, m.id));
  } catch (err) {
    showError(err.message);
  }
  loadSessions(list, "");
}

// A refused question (e.g. too large for the members' tpm: a 400 naming the limit) stays typed,
// its one-line reason shown; the session the server kept failed appears in the list (onRefused).
async function ask(councilSelect, question, seed, onRefused) {
  const body = { council: councilSelect.value, question: question.value };
  if (seed.value !== "") body.seed = Number(seed.value);
  try {
    const started = await api("/v1/sessions", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    location.hash = "#/session/" + encodeURIComponent(started.session_id);
  } catch (err) {
    showError(err.message);
    onRefused();
  }
}

async function loadSessions(list, query) {
  try {
    const rows = await api("/v1/sessions?limit=50" + (query ? "&q=" + encodeURIComponent(query) : ""));
    const items = el("ul", { class: "sessions" }, rows.map((r) => el("li", {},
      el("a", { href: "#/session/" + encodeURIComponent(r.session_id), class: "question" }, r.question || "(question not stored)"),
      el("div", { class: "meta" }, el("span", { class: "badge " + r.status }, r.status), " ",
        r.council || r.kind || "", " · ", (r.created_at || "").replace("T", " ").slice(0, 16)))));
    list.replaceChildren(rows.length ? items : el("p", { class: "muted" }, query ? "No session matches." : "No sessions yet."));
  } catch (err) {
    showError(err.message);
  }
}

async function sessionView(main, id) {
  const mine = viewToken;
  const current = () => mine === viewToken;
  const view = el("div", { id: "session", class: "session" });
  main.append(view);
  let state = emptySession(id);
  let rows;
  try {
    rows = await api("/v1/sessions/" + encodeURIComponent(id));
  } catch (err) {
    showError(err.message);
    return;
  }
  if (rows && rows.answers && rows.status !== "running") {
    state = fromResult(rows.session_id || id, rows); // stored and finished: the whole result at once
    renderSession(view, state);
    return;
  }
  renderSession(view, state);
  let pending = false;
  try {
    await followEvents(id, (event) => {
      applyEvent(state, event);
      if (event.type === "synthesis_delta" && updateSynthesis(view, state)) return;
      if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; if (current()) renderSession(view, state); }); }
    }, current);
  } catch (err) {
    showError(err.message);
  }
  if (!current()) return;
  if (!state.members.length || state.status !== "running") {
    // Finished: the stored result is the full record (also for sessions run without events).
    try {
      const result = await api("/v1/sessions/" + encodeURIComponent(id));
      if (result.answers && current()) { const tab = state.tab; state = fromResult(id, result); state.tab = tab || state.tab; }
    } catch (err) { /* keep what the events showed */ }
  }
  if (current()) renderSession(view, state);
}

function updateSynthesis(view, s) {
  const box = view.querySelector("#synthesis-text");
  if (!box) return false;
  box.textContent = s.synthesis.text;
  return true;
}

const STAGES = { answer: "the members answer", review: "the reviewers rank", synthesis: "the chairman writes" };

function renderSession(view, s) {
  const parts = [];
  parts.push(el("div", { class: "card" },
    el("h2", { id: "question", class: "question-title" }, s.question === null ? "(question not stored)" : s.question || "…"),
    el("p", { class: "meta" }, "Council ", el("strong", {}, s.council || "…"), " · ",
      el("span", { id: "status", class: "badge " + s.status }, s.status),
      s.status === "running" && s.stage ? el("span", { id: "stage" }, " · now: " + STAGES[s.stage]) : null,
      " · session ", el("code", {}, s.id)),
    s.error ? el("p", { class: "error-text" }, s.error) : null,
    s.notices.length ? el("ul", { class: "notices" }, s.notices.map((n) => el("li", {}, n))) : null));

  // Stage 1: a tab per member.
  const members = s.members.length ? s.members : Object.keys(s.answers);
  const tabs = el("div", { class: "tabs", role: "tablist" }, members.map((m) => {
    const a = s.answers[m];
    const cls = "tab" + (m === s.tab ? " active" : "") + (a ? " " + a.status : " waiting");
    return el("button", { type: "button", role: "tab", class: cls, "aria-selected": m === s.tab ? "true" : "false",
      "data-member": m, onclick: () => { s.tab = m; renderSession(view, s); } }, m);
  }));
  const a = s.tab ? s.answers[s.tab] : null;
  const panel = el("div", { id: "answer-panel", class: "panel", role: "tabpanel" },
    a ? [el("p", { class: "meta" }, a.model || "", a.length ? " · " + a.length + " characters" : ""),
      a.status === "failed" ? el("p", { class: "error-text" }, a.error || "failed")
        : a.status === "late" && !a.text
          ? el("p", { class: "error-text" }, "late: still answering when its stage closed, not reviewed")
        : el("div", { class: "text answer-text" }, a.text === null || a.text === undefined ? "(text not stored)" : a.text)]
      : el("p", { class: "muted" }, "Waiting for the members' answers…"));
  parts.push(el("section", { id: "stage-answers", class: "card" }, el("h2", {}, "1 · Answers"), tabs, panel));

  // Stage 2: each reviewer's view, labels de-anonymised.
  const reviews = s.reviews.map((r) => {
    const byMember = {};
    for (const [label, member] of Object.entries(r.labels || {})) byMember[member] = label;
    const rows = (r.order || []).map((m, i) => el("tr", {},
      el("td", {}, String(i + 1)), el("td", {}, byMember[m] || ""), el("td", {}, m),
      el("td", { class: "num" }, fmt(r.scores[m])), el("td", { class: "reasoning" }, r.reasoning[m] || "")));
    return el("article", { class: "review" },
      el("h3", {}, r.reviewer, el("span", { class: "muted" }, " · " + (r.model || ""))),
      r.valid ? null : el("p", { class: "error-text" }, r.error || "invalid review"),
      el("div", { class: "scroll" }, el("table", {},
        el("thead", {}, el("tr", {}, el("th", {}, "Seen"), el("th", {}, "Label"), el("th", {}, "Member"), el("th", {}, "Score"), el("th", {}, "Reasoning"))),
        el("tbody", {}, rows))),
      r.ranking.length ? el("p", { class: "ranking" }, "Ranking: ",
        r.ranking.map((m, i) => (i ? " > " : "") + m + (byMember[m] ? " (" + byMember[m] + ")" : "")).join("")) : null);
  });
  parts.push(el("section", { id: "stage-reviews", class: "card" }, el("h2", {}, "2 · Reviews"),
    reviews.length ? reviews : el("p", { class: "muted" }, s.stage === "answer" || !s.stage ? "Reviews follow the answers." : "Waiting for the reviewers…")));

  // Consensus.
  const c = s.consensus;
  parts.push(el("section", { id: "consensus", class: "card" }, el("h2", {}, "Consensus"),
    c ? [el("p", { class: "meta" }, "Kendall's W = ", el("strong", { id: "kendall-w" }, fmt(c.kendall_w, 2)),
      c.p !== null && c.p !== undefined ? " (p = " + fmt(c.p, 3) + ")" : "", " · " + c.ballots + " ballots"),
    el("div", { class: "scroll" }, el("table", {},
      el("thead", {}, el("tr", {}, el("th", {}, "Rank"), el("th", {}, "Member"), el("th", {}, "Score"), el("th", {}, "Mean rank"), el("th", {}, "First places"))),
      el("tbody", {}, (c.table || []).map((e) => el("tr", {}, el("td", {}, String(e.rank)), el("td", {}, e.member),
        el("td", { class: "num" }, fmt(e.score, 2)), el("td", { class: "num" }, fmt(e.mean_rank, 2)), el("td", { class: "num" }, String(e.first_places)))))))]
      : el("p", { class: "muted" }, "The consensus follows the reviews.")));

  // Stage 3: the synthesis (streamed into #synthesis-text).
  const y = s.synthesis;
  parts.push(el("section", { id: "stage-synthesis", class: "card" }, el("h2", {}, "3 · Synthesis"),
    y.chairman ? el("p", { class: "meta" }, "Chairman: " + y.chairman) : null,
    y.status === "failed" ? el("p", { class: "error-text" }, y.error || "no synthesis") : null,
    el("div", { id: "synthesis-text", class: "text" }, y.text || "")));
  view.replaceChildren(...parts);
}

async function reportView(main, title, path) {
  const box = el("section", { class: "card" }, el("h2", {}, title), el("p", { class: "muted" }, "Loading…"));
  main.append(box);
  try {
    const data = await api(path);
    // The leaderboard's ratings first: the table people come for; the settings after.
    const lead = Array.isArray(data && data.models) ? data.models : null;
    const rest = lead ? Object.fromEntries(Object.entries(data).filter(([k]) => k !== "models")) : data;
    const parts = lead ? [renderValue(lead), el("h3", {}, "How it was computed")] : [];
    box.replaceChildren(el("h2", {}, title), ...parts, renderValue(rest));
  } catch (err) {
    showError(err.message);
  }
}

// Any JSON as nested lists and tables (the reports' shapes change; this shows them all).
function renderValue(value) {
  if (value === null || value === undefined) return el("span", { class: "muted" }, "—");
  if (Array.isArray(value)) {
    if (!value.length) return el("span", { class: "muted" }, "none");
    if (value.every((v) => v && typeof v === "object" && !Array.isArray(v))) {
      const keys = [...new Set(value.flatMap((v) => Object.keys(v)))];
      return el("div", { class: "scroll" }, el("table", {},
        el("thead", {}, el("tr", {}, keys.map((k) => el("th", {}, k)))),
        el("tbody", {}, value.map((row) => el("tr", {}, keys.map((k) => el("td", {}, cell(row[k]))))))));
    }
    return el("span", {}, value.map((v) => (typeof v === "object" ? JSON.stringify(v) : loose(v))).join(", "));
  }
  const rows = Object.values(value);
  if (typeof value === "object" && rows.length > 1 && rows.every(flatObject)) {
    // {name: {field: value}} (a report per reviewer, per model): one table, a row per name.
    return renderValue(Object.entries(value).map(([name, fields]) => Object.assign({ "": name }, fields)));
  }
  if (typeof value === "object") {
    return el("dl", { class: "kv" }, Object.entries(value).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, renderValue(v))]));
  }
  return el("span", {}, loose(value));
}

const flatObject = (v) => v && typeof v === "object" && !Array.isArray(v)
  && Object.values(v).every((x) => x === null || typeof x !== "object" || (Array.isArray(x) && x.every((y) => typeof y !== "object")));

// Reports' numbers: whole numbers as they are, others to 3 decimals.
const loose = (v) => (typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : fmt(v));

function cell(v) {
  if (v && typeof v === "object") return Array.isArray(v) ? v.map(loose).join(" – ") : JSON.stringify(v);
  return loose(v);
}

// -- the token ------------------------------------------------------------------------------
function setupToken() {
  const form = $("token-form");
  $("token-toggle").addEventListener("click", () => { form.hidden = !form.hidden; });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const value = $("token-input").value.trim();
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
    $("token-input").value = "";
    form.hidden = true;
    route();
  });
}

document.addEventListener("DOMContentLoaded", () => {
  setupToken();
  window.addEventListener("hashchange", route);
  route();
});

// The council web app: reads the server's API with fetch (the bearer token goes along) and
// builds every element with the DOM. Text from the server is inserted as text; a model's
// markdown goes through marked and DOMPurify (vendored, see vendor/README.md) and is inserted
// as the nodes DOMPurify returns, never as a string of markup.
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

// -- model text as markdown ------------------------------------------------------------------
// marked writes the HTML of the markdown with any raw HTML in the text escaped (shown, never
// parsed); DOMPurify then keeps only the elements and attributes markdown makes, and links to
// http(s) and mail only. Without the two libraries the text is shown as text.
const MARKDOWN_TAGS = ["p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre",
  "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td"];
const MARKDOWN_PURIFY = { ALLOWED_TAGS: MARKDOWN_TAGS, ALLOWED_ATTR: ["href", "title", "align", "start"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i, RETURN_DOM_FRAGMENT: true };
const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeMarkup = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
const canRender = typeof marked !== "undefined" && typeof DOMPurify !== "undefined" && DOMPurify.isSupported;
const markdownParser = canRender ? new marked.Marked({ gfm: true, async: false }).use({ renderer: {
  html: (token) => escapeMarkup(token.text),
  // an image would load from wherever the model says: its link instead
  image: (token) => '<a href="' + escapeMarkup(token.href) + '">' + escapeMarkup(token.text || token.href) + "</a>",
} }) : null;
if (canRender) {
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank"); // a model's link never replaces the app
      node.setAttribute("rel", "noopener noreferrer");
    }
    // a box that scrolls sideways: the keyboard scrolls it too
    if (node.tagName === "PRE" || node.tagName === "TABLE") node.setAttribute("tabindex", "0");
  });
}

// A box holding ``text`` rendered as markdown (class "md"), or as text (class "text": without
// the libraries, or for text marked cannot parse).
function markdown(attrs, text) {
  const value = text === null || text === undefined ? "" : String(text);
  let nodes = null;
  try {
    if (markdownParser) nodes = DOMPurify.sanitize(markdownParser.parse(value), MARKDOWN_PURIFY);
  } catch (err) {
    nodes = null;
  }
  const box = el("div", Object.assign({}, attrs, { class: (attrs.class || "") + (nodes ? " md" : " text") }));
  box.append(nodes || value);
  return box;
}

// The server's report fragments (the CLI's HTML reports, one source): escaped by the server,
// sanitised again here, charts (SVG) kept.
const REPORT_PURIFY = { USE_PROFILES: { html: true, svg: true }, RETURN_DOM_FRAGMENT: true };

// Said to screen readers (a polite live region): stage changes and the finished answer, never
// each streamed word.
function announce(text) {
  $("announcer").textContent = text;
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

async function call(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const reply = await fetch(path, opts);
  if (reply.status === 401) {
    $("token-form").hidden = false;
    throw new Error("This server needs its bearer token: enter it above.");
  }
  if (!reply.ok) {
    const body = await reply.json().catch(() => null);
    const message = body && body.error && body.error.message ? body.error.message : "HTTP " + reply.status;
    throw new Error(message);
  }
  return reply;
}

const api = async (path, options) => (await call(path, options)).json().catch(() => null);
const apiText = async (path) => (await call(path)).text();

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
    notices: [], stage: null, tab: null, error: null, rounds: [],
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
    case "round_started": // a deliberation round: the reviews shown are its own once they come
      s.rounds.push({ round: e.round, trigger: e.trigger, kendall_w_before: e.kendall_w_before, kendall_w_after: null, members: [] });
      s.reviews = [];
      break;
    case "revision":
      if (s.rounds.length) s.rounds[s.rounds.length - 1].members.push(e);
      if (e.changed && s.answers[e.member]) Object.assign(s.answers[e.member], { text: e.text, length: e.text ? e.text.length : 0 });
      break;
    case "round":
      if (s.rounds.length) s.rounds[s.rounds.length - 1].kendall_w_after = e.kendall_w_after;
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
  s.rounds = (r.deliberation && r.deliberation.rounds) || [];
  return s;
}

// -- views ----------------------------------------------------------------------------------
let viewToken = 0; // a newer view makes older streams stop

function route() {
  viewToken++;
  showError("");
  const hash = location.hash || "#/";
  const page = hash === "#/leaderboard" || hash === "#/bias" ? hash : "#/";
  for (const link of document.querySelectorAll(".nav a")) {
    if (link.getAttribute("href") === page) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const main = $("main");
  main.replaceChildren();
  if (hash.startsWith("#/session/")) return sessionView(main, decodeURIComponent(hash.slice("#/session/".length)));
  if (hash === "#/leaderboard") return reportView(main, null, "/v1/leaderboard");
  if (hash === "#/bias") return reportView(main, "Bias report", "/v1/bias-report");
  return homeView(main);
}

// A question box: Enter sends, Shift+Enter starts a new line (and Enter while an input method
// composes a word is the method's).
function questionBox(attrs) {
  const box = el("textarea", Object.assign({ rows: 3, required: true }, attrs));
  box.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing && box.form) {
      ev.preventDefault();
      box.form.requestSubmit();
    }
  });
  return box;
}

async function homeView(main) {
  const councilSelect = el("select", { id: "ask-council", name: "council", required: true });
  const question = questionBox({ id: "ask-question", name: "question", placeholder: "Ask the council a question",
    "aria-describedby": "ask-hint" });
  const seed = el("input", { id: "ask-seed", name: "seed", type: "number", min: 0, placeholder: "seed (optional)",
    "aria-label": "Seed (optional)" });
  const form = el("form", { id: "ask", class: "card ask", onsubmit: (ev) => {
    ev.preventDefault();
    const body = { council: councilSelect.value, question: question.value };
    if (seed.value !== "") body.seed = Number(seed.value);
    ask(body, [], () => loadSessions(list, search.value));
  } },
  el("h2", {}, "Ask a council"),
  el("label", { for: "ask-question" }, "Question"), question,
  el("p", { id: "ask-hint", class: "hint" }, "Enter sends; Shift+Enter starts a new line."),
  el("div", { class: "row" },
    el("label", { for: "ask-council", class: "inline" }, "Council"), councilSelect, seed,
    el("button", { type: "submit", id: "ask-submit" }, "Ask")));
  const search = el("input", { id: "search", type: "search", placeholder: "Search questions", "aria-label": "Search questions" });
  const list = el("div", { id: "sessions" });
  main.append(form, el("section", { class: "card" }, el("h2", {}, "Recent sessions"), search, list));
  let timer = null;
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => loadSessions(list, search.value), 200); });
  try {
    const models = await api("/v1/models");
    for (const m of models.data) {
      councilSelect.append(el("option", { value: m.id, selected: m.id === models.default_council }, m.id));
    }
  } catch (err) {
    showError(err.message);
  }
  loadSessions(list, "");
}

// The conversation a session continues, kept in this tab: its earlier turns, oldest first.
const THREAD_KEY = "council-thread:";

function earlierTurns(sessionId) {
  try {
    const turns = JSON.parse(sessionStorage.getItem(THREAD_KEY + sessionId) || "[]");
    return Array.isArray(turns) ? turns.filter((t) => t && typeof t.question === "string" && typeof t.answer === "string") : [];
  } catch (err) {
    return [];
  }
}

// Start a session; ``turns``: the conversation's earlier turns (sent as its history).
// A refused question (e.g. too large for the members' tpm: a 400 naming the limit) stays typed,
// its one-line reason shown; the session the server kept failed appears in the list (onRefused).
async function ask(body, turns, onRefused) {
  if (turns.length) {
    body.history = turns.flatMap((t) => [{ role: "user", content: t.question }, { role: "assistant", content: t.answer }]);
  }
  try {
    const started = await api("/v1/sessions", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    if (turns.length) {
      try { sessionStorage.setItem(THREAD_KEY + started.session_id, JSON.stringify(turns)); } catch (err) { /* storage full: asked all the same */ }
    }
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
  const turns = earlierTurns(id);
  if (turns.length) main.append(earlierCard(turns));
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
    main.append(followUpForm(state, turns));
    return;
  }
  renderSession(view, state);
  // Re-drawn at most once a frame; while the chairman writes, only the synthesis.
  let pending = null;
  const schedule = (what) => {
    const first = pending === null;
    pending = pending === "all" || what === "all" ? "all" : "synthesis";
    if (!first) return;
    requestAnimationFrame(() => {
      const what = pending;
      pending = null;
      if (!current()) return;
      if (what === "synthesis" && updateSynthesis(view, state)) return;
      renderSession(view, state);
    });
  };
  let stage = null;
  try {
    await followEvents(id, (event) => {
      applyEvent(state, event);
      if (state.stage !== stage) {
        stage = state.stage;
        announce("Now " + stageName(stage) + ".");
      }
      schedule(event.type === "synthesis_delta" ? "synthesis" : "all");
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
  if (!current()) return;
  renderSession(view, state);
  const answer = view.querySelector("#synthesis-text");
  announce("The session is " + state.status + "." + (answer && answer.textContent.trim() ? " The council's answer: " + answer.textContent.trim() : ""));
  main.append(followUpForm(state, turns));
}

// The turns before this session in its conversation, each question with the council's answer.
function earlierCard(turns) {
  return el("section", { id: "earlier", class: "card", "aria-label": "Earlier in this conversation" },
    el("h2", {}, "Earlier in this conversation"),
    turns.map((t) => el("article", { class: "turn" }, el("p", { class: "turn-question" }, t.question), markdown({ class: "turn-answer" }, t.answer))));
}

// A follow-up question: the same council, this conversation's turns sent along as its history.
function followUpForm(s, turns) {
  const answer = s.synthesis.text;
  if (!s.question || !answer || !s.council) return el("p", { class: "muted followup-none" }, "No follow-up: this session has no stored question and answer.");
  const box = questionBox({ id: "followup-question", name: "question", placeholder: "Ask a follow-up question",
    "aria-describedby": "followup-hint" });
  const form = el("form", { id: "followup", class: "card ask", onsubmit: (ev) => {
    ev.preventDefault();
    ask({ council: s.council, question: box.value }, turns.concat([{ question: s.question, answer: answer }]), () => {});
  } },
  el("h2", {}, el("label", { for: "followup-question" }, "Follow-up question")), box,
  el("p", { id: "followup-hint", class: "hint" }, "The council sees this conversation so far. Enter sends; Shift+Enter starts a new line."),
  el("div", { class: "row" }, el("button", { type: "submit", id: "followup-submit" }, "Ask")));
  return form;
}

function updateSynthesis(view, s) {
  const box = view.querySelector("#synthesis-text");
  if (!box) return false;
  box.replaceChildren(...markdown({}, s.synthesis.text).childNodes);
  return true;
}

const STAGES = { answer: "the members answer", review: "the reviewers rank", synthesis: "the chairman writes" };
const stageName = (stage) => STAGES[stage] || String(stage || "").replace(/_/g, " ");

function renderSession(view, s) {
  // What had the focus gets it back once the view is drawn again (a tab: the selected one).
  const active = document.activeElement;
  const refocus = active && view.contains(active) ? (active.getAttribute("role") === "tab" ? "tab" : active.id) : null;
  const parts = [];
  parts.push(el("div", { class: "card" },
    el("h2", { id: "question", class: "question-title" }, s.question === null ? "(question not stored)" : s.question || "…"),
    el("p", { class: "meta" }, "Council ", el("strong", {}, s.council || "…"), " · ",
      el("span", { id: "status", class: "badge " + s.status }, s.status),
      s.status === "running" && s.stage ? el("span", { id: "stage" }, " · now: " + stageName(s.stage)) : null,
      " · session ", el("code", {}, s.id)),
    s.error ? el("p", { class: "error-text" }, s.error) : null,
    s.notices.length ? el("ul", { class: "notices" }, s.notices.map((n) => el("li", {}, n))) : null));

  // Stage 1: a tab per member (arrow keys, Home and End move between them).
  const members = s.members.length ? s.members : Object.keys(s.answers);
  const selected = members.indexOf(s.tab);
  const tabs = el("div", { class: "tabs", role: "tablist", "aria-label": "Members' answers",
    onkeydown: (ev) => moveTab(ev, view, s, members) }, members.map((m, i) => {
    const a = s.answers[m];
    const cls = "tab" + (m === s.tab ? " active" : "") + (a ? " " + a.status : " waiting");
    return el("button", { type: "button", role: "tab", id: "tab-" + i, class: cls, "aria-controls": "answer-panel",
      "aria-selected": m === s.tab ? "true" : "false", tabindex: i === Math.max(selected, 0) ? "0" : "-1",
      "data-member": m, onclick: () => { s.tab = m; renderSession(view, s); } }, m);
  }));
  const a = s.tab ? s.answers[s.tab] : null;
  const panel = el("div", { id: "answer-panel", class: "panel", role: "tabpanel", tabindex: "0",
    "aria-labelledby": selected >= 0 ? "tab-" + selected : null },
    a ? [el("p", { class: "meta" }, a.model || "", a.length ? " · " + a.length + " characters" : ""),
      a.status === "failed" ? el("p", { class: "error-text" }, a.error || "failed")
        : a.status === "late" && !a.text
          ? el("p", { class: "error-text" }, "late: still answering when its stage closed, not reviewed")
        : a.text === null || a.text === undefined ? el("div", { class: "text answer-text" }, "(text not stored)")
          : markdown({ class: "answer-text" }, a.text)]
      : el("p", { class: "muted" }, "Waiting for the members' answers…"));
  parts.push(el("section", { id: "stage-answers", class: "card" }, el("h2", {}, "1 · Answers"), tabs, panel));

  // Stage 2: each reviewer's view, labels de-anonymised.
  const reviews = s.reviews.map((r, n) => {
    const byMember = {};
    for (const [label, member] of Object.entries(r.labels || {})) byMember[member] = label;
    const rows = (r.order || []).map((m, i) => el("tr", {},
      el("td", {}, String(i + 1)), el("td", {}, byMember[m] || ""), el("td", {}, m),
      el("td", { class: "num" }, fmt(r.scores[m])), el("td", { class: "reasoning" }, r.reasoning[m] || "")));
    return el("article", { class: "review" },
      el("h3", {}, r.reviewer, el("span", { class: "muted" }, " · " + (r.model || ""))),
      r.valid ? null : el("p", { class: "error-text" }, r.error || "invalid review"),
      el("div", { class: "scroll", tabindex: "0", id: "review-table-" + n }, el("table", {},
        el("thead", {}, el("tr", {}, el("th", {}, "Seen"), el("th", {}, "Label"), el("th", {}, "Member"), el("th", {}, "Score"), el("th", {}, "Reasoning"))),
        el("tbody", {}, rows))),
      r.ranking.length ? el("p", { class: "ranking" }, "Ranking: ",
        r.ranking.map((m, i) => (i ? " > " : "") + m + (byMember[m] ? " (" + byMember[m] + ")" : "")).join("")) : null);
  });
  parts.push(el("section", { id: "stage-reviews", class: "card" }, el("h2", {}, "2 · Reviews"),
    reviews.length ? reviews : el("p", { class: "muted" }, s.stage === "answer" || !s.stage ? "Reviews follow the answers." : "Waiting for the reviewers…")));

  // Deliberation rounds: who changed, how far from its own answer, whom it copied.
  if (s.rounds.length) {
    parts.push(el("section", { id: "deliberation", class: "card" }, el("h2", {}, "Deliberation"),
      s.rounds.map((r) => el("article", { class: "round" },
        el("h3", {}, "Round " + r.round, el("span", { class: "muted" }, " · " + r.trigger + " · Kendall's W " +
          fmt(r.kendall_w_before, 2) + " → " + fmt(r.kendall_w_after, 2))),
        el("div", { class: "scroll" }, el("table", {},
          el("thead", {}, el("tr", {}, el("th", {}, "Member"), el("th", {}, "Changed"), el("th", {}, "Similarity to its own"),
            el("th", {}, "Adopted from"), el("th", {}, "Reason"))),
          el("tbody", {}, r.members.map((m) => el("tr", { class: m.capitulation ? "capitulation" : null },
            el("td", {}, m.member), el("td", {}, m.status === "failed" ? "no valid reply" : (m.changed ? "yes" : "no")),
            el("td", { class: "num" }, fmt(m.similarity_to_own, 2)),
            el("td", {}, (m.adopted_from || "—") + (m.capitulation ? " (no reason given: capitulation)" : "")),
            el("td", { class: "reasoning" }, m.reason === null || m.reason === undefined ? "(not stored)" : m.reason))))))))));
  }

  // Consensus.
  const c = s.consensus;
  parts.push(el("section", { id: "consensus", class: "card" }, el("h2", {}, "Consensus"),
    c ? [el("p", { class: "meta" }, "Kendall's W = ", el("strong", { id: "kendall-w" }, fmt(c.kendall_w, 2)),
      c.p !== null && c.p !== undefined ? " (p = " + fmt(c.p, 3) + ")" : "", " · " + c.ballots + " ballots"),
    el("div", { class: "scroll", tabindex: "0", id: "consensus-table" }, el("table", {},
      el("thead", {}, el("tr", {}, el("th", {}, "Rank"), el("th", {}, "Member"), el("th", {}, "Score"), el("th", {}, "Mean rank"), el("th", {}, "First places"))),
      el("tbody", {}, (c.table || []).map((e) => el("tr", {}, el("td", {}, String(e.rank)), el("td", {}, e.member),
        el("td", { class: "num" }, fmt(e.score, 2)), el("td", { class: "num" }, fmt(e.mean_rank, 2)), el("td", { class: "num" }, String(e.first_places)))))))]
      : el("p", { class: "muted" }, "The consensus follows the reviews.")));

  // Stage 3: the synthesis (streamed into #synthesis-text; busy, so not read out, until it ends).
  const y = s.synthesis;
  parts.push(el("section", { id: "stage-synthesis", class: "card" }, el("h2", {}, "3 · Synthesis"),
    y.chairman ? el("p", { class: "meta" }, "Chairman: " + y.chairman) : null,
    y.status === "failed" ? el("p", { class: "error-text" }, y.error || "no synthesis") : null,
    markdown({ id: "synthesis-text", "aria-busy": s.status === "running" ? "true" : "false" }, y.text || "")));
  view.replaceChildren(...parts);
  const again = refocus === "tab" ? view.querySelector('[role="tab"][tabindex="0"]') : refocus && document.getElementById(refocus);
  if (again) again.focus();
}

// The member tabs' keys (the ARIA tabs pattern, selection follows focus).
function moveTab(ev, view, s, members) {
  if (!members.length || ev.target.getAttribute("role") !== "tab") return;
  const at = Math.max(members.indexOf(s.tab), 0);
  const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: members.length - 1 }[ev.key];
  if (to === undefined) return;
  ev.preventDefault();
  s.tab = members[(to + members.length) % members.length];
  renderSession(view, s); // the focus follows to the selected tab
}

// The leaderboard and the bias report: the very HTML of ``council leaderboard --html`` and
// ``council bias-report --html`` (the server renders it, styled by its report.css).
async function reportView(main, title, path) {
  const box = el("section", { class: "card report", "aria-busy": "true" },
    title ? el("h2", {}, title) : null, el("p", { class: "muted" }, "Loading…"));
  main.append(box);
  try {
    const html = await apiText(path + "?format=html");
    const content = canRender ? DOMPurify.sanitize(html, REPORT_PURIFY) : el("p", { class: "muted" }, "This view needs its scripts.");
    box.replaceChildren(...(title ? [el("h2", {}, title)] : []), content);
  } catch (err) {
    showError(err.message);
  }
  box.setAttribute("aria-busy", "false");
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

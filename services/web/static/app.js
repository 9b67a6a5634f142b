// The Covel player page: plain JavaScript over the HTTP/JSON API (docs/web.md), no build step.
"use strict";

const TEXT = {
  en: { title: "Covel", pickWorld: "Pick a world", resume: "Resume the last session", yourSessions: "Your sessions", kind: "Action", what: "What you do",
        send: "Send", cancel: "Stop", answer: "Answer", yes: "Yes", no: "No", down: "The story service cannot be reached; retrying…",
        ready: "Connected", thinking: "Telling the story…", setup: "Setting up the story…", other: "中文",
        retrying: "The story service is busy or restarting; trying again…", regenerate: "Regenerate", edit: "Edit", delete: "Delete",
        continue: "Continue", rewind: "Rewind here", branch: "Branch from here", editing: "Edit what you did, then send",
        signIn: "Sign in", signOut: "Sign out", tokenLabel: "Your access token", signInNeeded: "Sign in to play", dismiss: "Dismiss", dark: "Dark",
        panels: "Panels" },
  zh: { title: "Covel", pickWorld: "选择一个世界", resume: "继续上一局", yourSessions: "你的故事", kind: "行动", what: "你要做什么",
        send: "发送", cancel: "停止", answer: "回答", yes: "是", no: "否", down: "无法连接故事服务，正在重试……",
        ready: "已连接", thinking: "正在讲述……", setup: "正在准备故事……", other: "English",
        retrying: "故事服务繁忙或正在重启，正在重试……", regenerate: "重新生成", edit: "编辑", delete: "删除",
        continue: "继续", rewind: "回到这里", branch: "从这里分支", editing: "修改你做的事，然后发送",
        signIn: "登录", signOut: "退出登录", tokenLabel: "你的访问令牌", signInNeeded: "登录后才能游玩", dismiss: "关闭", dark: "深色",
        panels: "面板" },
};
const state = { locale: localStorage.getItem("covelLocale") || "en", session: null, kinds: [], busy: false, editing: false, versions: null,
                // How long a notice stays, by level (ms): long enough to read, then it goes.
                noticeMs: { info: 8000, success: 8000, warning: 20000, error: 20000 } };
const $ = (id) => document.getElementById(id);
const t = (key) => (TEXT[state.locale] || TEXT.en)[key];

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value; else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function setStatus(text, down = false) {
  $("status").textContent = text;
  $("status").classList.toggle("down", down);
  $("status").classList.toggle("busy", state.busy && !down);
}
// The API answered: "Connected", or the running turn's "Telling the story…".
function connected() { setStatus(state.busy ? t("thinking") : t("ready")); }

function translate() {
  document.documentElement.lang = state.locale;
  for (const node of document.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  $("lang").textContent = t("other");
  $("text").placeholder = t("what");
  $("signout").hidden = !localStorage.getItem("covelToken");
}

// Light or dark: the system's preference until the toggle chooses (kept in localStorage as covelTheme).
function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  const dark = theme ? theme === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
  $("theme").setAttribute("aria-pressed", String(dark));
}

// ---- the API ------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) { super(body.message || `HTTP ${status}`); this.status = status; this.body = body; }
}

function headers() {
  const token = localStorage.getItem("covelToken");
  return { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) };
}

async function api(method, path, body) {
  let response;
  try {
    response = await fetch(path, { method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    setStatus(t("down"), true);
    throw new ApiError(0, { code: "UNAVAILABLE", message: t("down") });
  }
  const data = await response.json().catch(() => ({}));
  if (response.status === 503) setStatus(t("down"), true); else if (response.status === 401) askToken(data); else connected();
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// POST a streamed call; onEvent(name, data) per Server-Sent Event. `signal` (an AbortSignal) ends it from here.
async function stream(path, body, onEvent, signal) {
  let response;
  try {
    response = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body), signal });
  } catch (error) {
    if (signal && signal.aborted) throw error;
    setStatus(t("down"), true);
    throw new ApiError(0, { code: "UNAVAILABLE", message: t("down") });
  }
  if (!response.ok) {
    const data = await response.json().catch(() => ({}));
    if (response.status === 503) setStatus(t("down"), true); else if (response.status === 401) askToken(data);
    throw new ApiError(response.status, data);
  }
  connected();
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const name = (frame.match(/^event: (.*)$/m) || [])[1] || "message";
      const data = (frame.match(/^data: (.*)$/m) || [])[1];
      const parsed = data ? JSON.parse(data) : {};
      // A turn that failed for a passing reason: sent again by streamRetried.
      if (name === "error" && parsed.retryAfterMs !== undefined) throw new ApiError(503, parsed);
      onEvent(name, parsed);
    }
  }
}

// A submit sent again, with the same body (its idempotency key), while the API says a retry may pass
// (docs/retries.md): its RetryInfo, or the scheduler unreachable; for up to 30 s.
async function streamRetried(path, body, makeHandler) {
  const giveUp = Date.now() + 30000;
  for (;;) {
    try {
      return await stream(path, body, makeHandler());
    } catch (error) {
      const wait = error.body && error.body.retryAfterMs !== undefined ? error.body.retryAfterMs : error.status === 503 || error.status === 0 ? 1000 : null;
      if (wait === null || Date.now() + wait > giveUp) throw error;
      for (const partial of document.querySelectorAll("#story p.live")) partial.remove();
      setStatus(t("retrying"), true);
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

// ---- signing in (the scheduler asks for a bearer token: COVEL_API_TOKEN, per-user tokens or an OIDC issuer's JWT) ----

// The API answered 401: the token form, with the API's reason when a token was sent and refused.
function askToken(body) {
  setStatus(t("signInNeeded"), true);
  $("signin").hidden = false;
  $("start").hidden = true;
  $("play").hidden = true;
  $("signin-error").textContent = localStorage.getItem("covelToken") ? body.message || "" : "";
  $("token").focus();
}

function signOut() {
  localStorage.removeItem("covelToken");
  localStorage.removeItem("covelSession");
  location.assign("/");
}

const newKey = () => (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random());

// ---- the story ----------------------------------------------------------------------------------

// A player's line as the runtimes read it marks a kind other than say/act: 【who·label】text. The page shows the
// text under its label; a line that is only the mark (【advance】: the story asked to go on) is not story.
const MARKED = /^【([^】]*)】\s*(.*)$/s;

// A marked line's fields, written after its text as JSON ({"topic": "the lens"}), read as "(topic: the lens)".
function withFields(text) {
  const [, said, json] = /^(.*?)\s*(\{.*\})$/s.exec(text) || [];
  try {
    const fields = Object.entries(JSON.parse(json)).map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`);
    return `${said} (${fields.join(", ")})`.trim();
  } catch { return text; }
}

function addMessage(role, text, speaker, turnId) {
  const story = $("story");
  const marked = role === "player" && MARKED.exec(text);
  if (marked && !marked[2]) return;
  if (marked) story.append(el("p", { class: "player" }, withFields(marked[2]), el("span", { class: "kind" }, ` · ${marked[1]}`)));
  else if (role === "player") story.append(el("p", { class: "player" }, text));
  else if (speaker) story.append(el("p", {}, el("span", { class: "speaker" }, `${speaker}: `), ...storyInline(text)));
  else story.append(el("p", {}, ...storyInline(text))); // markdown.js: the story's marks, sanitised
  if (turnId) story.lastChild.dataset.turn = turnId;
  story.lastChild.scrollIntoView({ block: "nearest" });
}

// The API's JSON names enum values in full (MESSAGE_ROLE_STORY): the part after the prefix, lower case.
function shortName(value, prefix) { return value ? value.slice(prefix.length).toLowerCase() : ""; }

// A notice stays for its level's time (state.noticeMs), or until dismissed.
function notice(level, text) {
  const shown = el("div", { class: `notice ${level || "info"}`, role: level === "error" ? "alert" : "status" }, text,
                   el("button", { type: "button", class: "dismiss", "aria-label": t("dismiss"), onclick: () => shown.remove() }, "×"));
  $("notices").append(shown);
  setTimeout(() => shown.remove(), state.noticeMs[level] || state.noticeMs.info);
}

// A turn as it streams: story text per segment, notices and questions as they come.
function turnHandler() {
  let paragraph = null;
  return (name, data) => {
    if (name === "narrativeDelta") {
      if (data.reset) { paragraph = null; return; }
      if (data.text === "\n\n" || !paragraph) {
        if (paragraph) renderParagraph(paragraph); // markdown.js: a finished paragraph with its marks
        paragraph = el("p", { class: "live" });
        if (data.segment && data.segment.kind === "SEGMENT_KIND_DIALOGUE" && data.segment.speaker) paragraph.append(el("span", { class: "speaker" }, `${data.segment.speaker}: `));
        $("story").append(paragraph);
        if (data.text === "\n\n") return;
      }
      paragraph.append(data.text);
      paragraph.scrollIntoView({ block: "nearest" });
    } else if (name === "notification") notice(shortName(data.level, "NOTIFICATION_LEVEL_"), (data.title ? `${data.title}: ` : "") + data.text);
    else if (name === "interaction") showQuestion(data);
    else if (name === "turnCompleted") { if (paragraph) renderParagraph(paragraph); afterTurn(data); }
    else if (name === "error") notice("error", data.message);
  };
}

// The story's cues (scene, who is present, mood) as one quiet line under it.
function showCues(messages) {
  for (const message of messages || []) {
    const cues = message.role === "MESSAGE_ROLE_STORY" && message.metadata && message.metadata.cues;
    if (!cues) continue;
    const parts = [cues.scene, (cues.present || []).join(", "), cues.mood].filter(Boolean);
    if (parts.length) $("story").append(el("p", { class: "cue" }, parts.join(" · ")));
  }
}

function afterTurn(turn) {
  if (turn.retryable) return; // tried again (streamRetried): its retry shows the story
  if (turn.status === "TURN_STATUS_FAILED" || turn.status === "TURN_STATUS_ABORTED") notice("error", turn.abortReason || turn.status);
  showCues(turn.messages);
  if (turn.status === "TURN_STATUS_COMMITTED") for (const p of document.querySelectorAll("#story p:not([data-turn])")) p.dataset.turn = turn.id;
  drawMoves().catch(() => {});
  const guide = (turn.runtimeResults || []).find((r) => r.runtimeId === "guide" && r.status === "RUNTIME_STATUS_SUCCESS");
  showSuggestions(guide && guide.output ? guide.output.suggestions || [] : []);
  refresh();
}

async function play(actions) {
  if (state.busy) return;
  setBusy(true);
  $("composer-error").textContent = "";
  for (const action of actions) if (action.text || action.fields) addMessage("player", playerLine(action));
  try {
    await streamRetried(`/api/sessions/${state.session.id}/actions`, { actions, idempotencyKey: newKey() }, turnHandler);
  } catch (error) {
    $("composer-error").textContent = fieldMessage(error);
  } finally { setBusy(false); }
}

// An action as the story shows it: say and act as written, another kind marked as the runtimes read it (addMessage).
function playerLine(action) {
  if (["say", "act"].includes(action.kind) && !action.fields) return action.text;
  const kind = state.kinds.find((k) => k.kind === action.kind);
  return `【${(kind && kind.label) || action.kind}】${action.text}${action.fields ? ` ${JSON.stringify(action.fields)}` : ""}`;
}

function setBusy(busy) {
  state.busy = busy;
  $("story").setAttribute("aria-busy", String(busy));
  syncComposer();
  if (busy || $("status").classList.contains("busy")) connected(); // a line saying the API is down stays
}

// The composer is off while a turn runs or a question (form, choice, confirmation) waits for its answer.
function syncComposer() {
  const asked = $("questions").children.length > 0;
  for (const id of ["text", "kind", "send"]) $(id).disabled = state.busy || asked;
  for (const input of $("kind-fields").querySelectorAll("input")) input.disabled = state.busy || asked;
  $("cancel").disabled = !state.busy;
}

function fieldMessage(error) {
  const violations = (error.body && error.body.fieldViolations) || [];
  return violations.length ? violations.map((v) => `${v.field}: ${v.description}`).join("; ") : error.message;
}

function showSuggestions(list) {
  const box = $("suggestions");
  box.replaceChildren(...list.map((text) => el("li", {}, el("button", { type: "button", onclick: () => play([{ kind: "act", text }]) }, text))));
}

// ---- the story's moves (docs/api.md "Story moves"): regenerate with versions, edit, delete, continue, rewind, branch ----

// The newest part of the story (a long session pages further with pageToken), each paragraph with its turn.
// A form's or a confirmation's answer (name: Wren; courage: 4) is the runtimes' reading, not story: as in a live
// turn, where the answered question just goes, its turn's player line is left out.
async function drawStory() {
  const path = `/api/sessions/${state.session.id}`;
  const [{ messages = [] }, { interactions = [] }] = await Promise.all([api("GET", `${path}/messages?limit=200`),
    api("GET", `${path}/interactions?includeAnswered=true`).catch(() => ({}))]);
  const answers = new Set(interactions.filter((r) => r.answeredTurnId && r.interaction.kind !== "INTERACTION_KIND_CHOICE").map((r) => r.answeredTurnId));
  $("story").replaceChildren();
  for (const message of messages) {
    if (message.role === "MESSAGE_ROLE_PLAYER" && answers.has(message.turnId)) continue;
    if (message.role === "MESSAGE_ROLE_PLAYER" || message.role === "MESSAGE_ROLE_STORY") addMessage(shortName(message.role, "MESSAGE_ROLE_"), message.text, "", message.turnId);
  }
  await drawMoves();
}

// Rewind and branch on each turn's last paragraph; the toolbar and ‹ 2/3 › for the last player's turn.
async function drawMoves() {
  for (const old of document.querySelectorAll("#story .turn-moves")) old.remove();
  const last = new Map();
  for (const p of document.querySelectorAll("#story p[data-turn]")) last.set(p.dataset.turn, p);
  for (const [turnId, p] of last) {
    p.append(el("span", { class: "turn-moves" },
      el("button", { type: "button", "data-rewind": turnId, onclick: () => move("rewind", { turnId }) }, t("rewind")),
      el("button", { type: "button", "data-branch": turnId, onclick: () => branchFrom(turnId) }, t("branch"))));
  }
  state.versions = await api("GET", `/api/sessions/${state.session.id}/versions`).catch(() => null);
  const versions = (state.versions && state.versions.versions) || [];
  const chosen = (state.versions && state.versions.chosen) || 0;
  $("moves").hidden = versions.length === 0;
  $("versions").hidden = versions.length < 2;
  $("version-shown").textContent = `${chosen + 1}/${versions.length}`;
  $("version-prev").disabled = chosen <= 0;
  $("version-next").disabled = chosen >= versions.length - 1;
}

// A move that answers ABORTED while the session's detached work holds its lease is sent again after the delay.
async function apiRetried(method, path, body) {
  const giveUp = Date.now() + 30000;
  for (;;) {
    try { return await api(method, path, body); } catch (error) {
      const wait = error.body && error.body.retryAfterMs !== undefined ? Number(error.body.retryAfterMs) : null;
      if (wait === null || Date.now() + wait > giveUp) throw error;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

async function move(kind, body) {
  if (state.busy) return;
  try {
    await apiRetried("POST", `/api/sessions/${state.session.id}/${kind}`, { ...body, requestId: newKey() });
    await drawStory();
    await refresh();
  } catch (error) { notice("error", fieldMessage(error)); }
}

async function branchFrom(turnId) {
  try {
    const { session } = await apiRetried("POST", `/api/sessions/${state.session.id}/branch`, { turnId, requestId: newKey() });
    await openSession(session);
  } catch (error) { notice("error", fieldMessage(error)); }
}

async function chooseVersion(step) {
  const { versions = [], chosen = 0 } = state.versions || {};
  const wanted = versions[chosen + step];
  if (wanted) await move("versions", { turnId: wanted.id });
}

// The last player's turn again: as it was (regenerate), with other actions (edit), or without them (delete).
async function retry(body) {
  if (state.busy) return;
  const lastTurn = [...document.querySelectorAll("#story p[data-turn]")].pop();
  setBusy(true);
  $("composer-error").textContent = "";
  try {
    if (lastTurn) for (const p of document.querySelectorAll(`#story p[data-turn="${lastTurn.dataset.turn}"]`)) p.remove();
    for (const action of body.actions || []) if (action.text) addMessage("player", action.text);
    await streamRetried(`/api/sessions/${state.session.id}/retry`, { ...body, idempotencyKey: newKey() }, turnHandler);
  } catch (error) {
    $("composer-error").textContent = fieldMessage(error);
  } finally { setBusy(false); }
  await drawStory();
}

// ---- questions (forms, choices, confirmations) ----------------------------------------------------

function showQuestion(asked) {
  if (document.getElementById(`q-${asked.id}`)) return;
  const spec = asked.spec || {};
  const form = el("form", { class: "question", id: `q-${asked.id}`, "aria-label": asked.title || asked.prompt || "", novalidate: "" });
  if (asked.title) form.append(el("h3", {}, asked.title));
  if (asked.prompt) form.append(el("p", {}, asked.prompt));
  const errors = {};
  if (asked.kind === "INTERACTION_KIND_FORM") {
    const properties = (spec.schema || {}).properties || {};
    for (const name of spec.fieldOrder || Object.keys(properties)) {
      const field = properties[name] || {};
      const id = `q-${asked.id}-${name}`;
      let input;
      if (field.enum) input = el("select", { id, name }, ...field.enum.map((option) => el("option", { value: option }, String(option))));
      else input = el("input", { id, name, type: field.type === "integer" || field.type === "number" ? "number" : "text" });
      if (field.minimum !== undefined) input.min = field.minimum;
      if (field.maximum !== undefined) input.max = field.maximum;
      if (field.default !== undefined) input.value = field.default;
      errors[name] = el("span", { class: "error", id: `${id}-error`, role: "alert" });
      input.setAttribute("aria-describedby", `${id}-error`);
      form.append(el("label", { for: id }, field.title || name), input, errors[name]);
    }
    form.append(el("button", { type: "submit" }, t("answer")));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const values = {};
      for (const name of Object.keys(errors)) {
        const input = form.elements[name];
        if (input.value === "") continue;
        const field = properties[name] || {};
        values[name] = field.type === "integer" ? Number.parseInt(input.value, 10) : field.type === "number" ? Number(input.value) : input.value;
      }
      answer(asked, values, form, errors);
    });
  } else if (asked.kind === "INTERACTION_KIND_CHOICE") {
    for (const option of spec.options || []) {
      form.append(el("button", { type: "button", onclick: () => answer(asked, { option: option.id }, form, {}) }, option.label));
    }
  } else {
    form.append(el("button", { type: "button", onclick: () => answer(asked, { confirmed: true }, form, {}) }, t("yes")),
                el("button", { type: "button", onclick: () => answer(asked, { confirmed: false }, form, {}) }, t("no")));
  }
  form.append(el("p", { class: "error form-error", role: "alert" }));
  $("questions").append(form);
  const first = form.querySelector("input, select, button");
  if (first) first.focus();
}

async function answer(asked, values, form, errors) {
  for (const span of Object.values(errors)) span.textContent = "";
  form.querySelector(".form-error").textContent = "";
  setBusy(true);
  try {
    await streamRetried(`/api/sessions/${state.session.id}/interactions/${encodeURIComponent(asked.id)}`,
                        { values, idempotencyKey: newKey() }, turnHandler);
    form.remove();
  } catch (error) {
    let placed = false;
    for (const violation of (error.body && error.body.fieldViolations) || []) {
      const name = violation.field.split("values.").pop().split(".")[0];
      if (errors[name]) { errors[name].textContent = violation.description; placed = true; }
    }
    if (!placed) form.querySelector(".form-error").textContent = fieldMessage(error);
  } finally { setBusy(false); }
}

// ---- panels --------------------------------------------------------------------------------------

function resolve(value, pointer) {
  for (const raw of pointer.split("/").slice(1)) {
    const part = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (value === null || value === undefined || typeof value !== "object") return undefined;
    value = value[part];
  }
  return value;
}

function bind(text, panelState, item, key) {
  return String(text).replace(/\{\{\s*([^{}]+?)\s*\}\}/g, (_, reference) => {
    let found;
    if (reference === "$key") found = key;
    else if (reference.startsWith("$item")) { found = item; for (const part of reference.split(".").slice(1)) found = found && typeof found === "object" ? found[part] : undefined; }
    else found = resolve(panelState, reference);
    return found === undefined || found === null || typeof found === "object" ? "" : typeof found === "boolean" ? (found ? "yes" : "no") : String(found);
  });
}

function drawNode(node, panelState, item, key) {
  const prop = (name) => (node[name] === undefined ? "" : bind(node[name], panelState, item, key));
  const children = () => (node.children || []).map((child) => drawNode(child, panelState, item, key));
  switch (node.type) {
    case "stack": return el("div", { class: "stack" }, node.title ? el("h3", {}, prop("title")) : null, ...children());
    case "row": return el("div", { class: "row" }, ...children());
    case "heading": return el("h4", {}, prop("text"));
    case "text": return el("p", { class: node.tone || "" }, prop("text"));
    case "badge": return el("span", { class: `badge ${node.tone || ""}` }, prop("text"));
    case "stat": return el("div", { class: "stat" }, el("span", {}, prop("label")), el("strong", {}, prop("value")));
    case "progress": return el("label", {}, prop("label"), el("progress", { value: prop("value"), max: prop("max") }));
    case "image": case "audio": return mediaNode(node.type, prop); // media.js: the world's pictures and music
    case "list": {
      const found = resolve(panelState, node.repeat.statePath);
      const entries = Array.isArray(found) ? found.map((v, i) => [String(i), v]) : found && typeof found === "object" ? Object.entries(found).sort(([a], [b]) => (a < b ? -1 : 1)) : [];
      if (!entries.length) return el("p", { class: "empty" }, node.empty ? prop("empty") : "");
      return el("ul", {}, ...entries.map(([k, v]) => el("li", {}, ...(node.children || []).map((child) => drawNode(child, panelState, v, k)))));
    }
    default: return el("span");
  }
}

async function drawPanels() {
  const { panels = [] } = await api("GET", `/api/sessions/${state.session.id}/panels`);
  layoutPanels(panels); // panels.js: tabs by group, a drawer on a narrow screen
}

// A webview panel (a page of the plugin's own) runs in a sandboxed frame (webview.js, docs/web.md "Webview panels").
function panelBody(panel) {
  const title = panel.label ? el("h3", {}, panel.label) : null;
  if (panel.webview) return [title, webviewFrame(panel)]; // webview.js: a sandboxed frame and its bridge
  if (panel.empty) return [title, el("p", { class: "empty" }, panel.emptyStateMessage)];
  return [drawNode(panel.spec.view, panel.state || {})];
}

// ---- session -------------------------------------------------------------------------------------

async function drawKinds() {
  const { kinds = [] } = await api("GET", `/api/sessions/${state.session.id}/action-kinds`);
  state.kinds = kinds.filter((kind) => kind.composer !== false && (!kind.roles || kind.roles.includes("SEAT_ROLE_PLAYER")));
  const select = $("kind");
  const current = select.value;
  select.replaceChildren(...state.kinds.map((kind) => el("option", { value: kind.kind }, kind.label || kind.kind)));
  // Plain text acts, as in `covel play`; another kind chosen stays chosen.
  select.value = current || (state.kinds.some((kind) => kind.kind === "act") ? "act" : select.value);
  drawKindFields();
}

function drawKindFields() {
  const kind = state.kinds.find((k) => k.kind === $("kind").value);
  $("text").placeholder = (kind && kind.placeholder) || t("what");
  const properties = ((kind && kind.fieldsSchema) || {}).properties || {};
  $("kind-fields").replaceChildren(...Object.entries(properties).map(([name, field]) => {
    const id = `field-${name}`;
    return el("span", {}, el("label", { for: id }, ` ${field.title || name} `), el("input", { id, name, "data-field": name, type: field.type === "integer" ? "number" : "text" }));
  }));
  syncComposer();
}

async function refresh() {
  const { interactions = [] } = await api("GET", `/api/sessions/${state.session.id}/interactions`);
  for (const record of interactions) showQuestion(record.interaction);
  await Promise.all([drawPanels(), drawKinds(), drawApprovals()]); // approval.js: community plugins to approve
}

async function openSession(session) {
  state.session = session;
  localStorage.setItem("covelSession", session.id);
  $("start").hidden = true;
  $("play").hidden = false;
  await drawStory();
  await refresh();
  if (session.phase === "SESSION_PHASE_SETUP" && !document.querySelector(".question")) {
    setStatus(t("setup"));
    await play([{ kind: "advance" }]);
  }
  const asked = document.querySelector(".question input, .question select, .question button");
  (asked || $("text")).focus();
}

async function startIn(worldId) {
  const { session } = await api("POST", "/api/sessions", { worldId, locale: state.locale });
  await openSession(session);
}

// The caller's sessions (ListSessions), newest activity first: any of them can be played on.
async function listMine() {
  const { sessions = [] } = await api("GET", "/api/sessions?pageSize=10").catch(() => ({}));
  $("mine-title").hidden = sessions.length === 0;
  $("mine").replaceChildren(...sessions.map((session) => el("li", {}, el("button", {
    type: "button", "data-session": session.id, onclick: () => openSession(session).catch((e) => notice("error", fieldMessage(e))) },
    `${session.title || session.worldId || session.id} · ${new Date(session.updatedAt).toLocaleString(state.locale)}`))));
}

async function boot() {
  translate();
  try {
    const { worlds = [] } = await api("GET", `/api/worlds?locale=${state.locale}`);
    $("worlds").replaceChildren(...worlds.filter((w) => w.state === "WORLD_STATE_LOADED").map((world) =>
      el("li", {}, el("button", { type: "button", "data-world": world.id, onclick: () => startIn(world.id).catch((e) => notice("error", fieldMessage(e))) },
                      el("strong", {}, world.name || world.id), world.description ? ` — ${world.description}` : ""))));
    setStatus(t("ready"));
  } catch (error) {
    if (error.status !== 401) setTimeout(boot, 3000); // 401: the token form is shown; its answer boots again
    return;
  }
  $("signin").hidden = true;
  $("start").hidden = false;
  await listMine();
  const last = localStorage.getItem("covelSession");
  $("resume").hidden = !last;
  $("resume").onclick = async () => {
    try { const { session } = await api("GET", `/api/sessions/${last}`); await openSession(session); }
    catch (error) { notice("error", fieldMessage(error)); localStorage.removeItem("covelSession"); $("resume").hidden = true; }
  };
  const wanted = new URLSearchParams(location.search).get("session");
  if (wanted) await api("GET", `/api/sessions/${wanted}`).then(({ session }) => openSession(session)).catch((e) => notice("error", fieldMessage(e)));
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("text").value.trim();
  const kind = $("kind").value || "act";
  const fields = {};
  for (const input of $("kind-fields").querySelectorAll("[data-field]")) {
    if (input.value !== "") fields[input.dataset.field] = input.type === "number" ? Number(input.value) : input.value;
  }
  if (!text && !Object.keys(fields).length && kind !== "advance") return;
  $("text").value = "";
  const action = { kind, text, ...(Object.keys(fields).length ? { fields } : {}) };
  if (state.editing) { state.editing = false; retry({ replaceActions: true, actions: [action] }); } else play([action]);
});
$("regenerate").addEventListener("click", () => retry({}));
$("delete").addEventListener("click", () => retry({ replaceActions: true }));
$("continue").addEventListener("click", () => play([{ kind: "advance" }]));
$("version-prev").addEventListener("click", () => chooseVersion(-1));
$("version-next").addEventListener("click", () => chooseVersion(1));
$("edit").addEventListener("click", () => {
  const said = [...document.querySelectorAll("#story p.player")].pop();
  state.editing = true;
  $("text").value = said && said.firstChild ? said.firstChild.textContent : "";
  $("text").placeholder = t("editing");
  $("text").focus();
});
$("kind").addEventListener("change", drawKindFields);
new MutationObserver(syncComposer).observe($("questions"), { childList: true });
$("signin").addEventListener("submit", (event) => {
  event.preventDefault();
  localStorage.setItem("covelToken", $("token").value.trim());
  $("token").value = "";
  translate();
  boot();
});
$("signout").addEventListener("click", signOut);
$("theme").addEventListener("click", () => {
  const theme = $("theme").getAttribute("aria-pressed") === "true" ? "light" : "dark";
  localStorage.setItem("covelTheme", theme);
  applyTheme(theme);
});
applyTheme(localStorage.getItem("covelTheme"));
$("cancel").addEventListener("click", () => api("POST", `/api/sessions/${state.session.id}/cancel`, {}).catch((e) => notice("error", fieldMessage(e))));
$("lang").addEventListener("click", () => {
  state.locale = state.locale === "en" ? "zh" : "en";
  localStorage.setItem("covelLocale", state.locale);
  translate();
  if (!state.session) boot();
});
// After the page's modules (panels.js, ...) ran: they are deferred, this script is not.
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot); else boot();

// A context and token gauge under each turn (docs/web.md "Token gauge"): how much of the model's context the
// turn's largest prompt filled (a meter when the gateway slot names its window) and the tokens its model calls
// read and wrote, from Turn.usage (GET .../turns). Uses app.js's globals: api, el, state.
"use strict";

const WORDS = {
  en: { context: "context", of: "of", written: "written", calls: "model calls", read: "read", label: "Tokens this turn used" },
  zh: { context: "上下文", of: "/", written: "生成", calls: "次模型调用", read: "读入", label: "本回合用的 token" },
};
const say = (key) => (WORDS[state.locale] || WORDS.en)[key];
const usages = new Map(); // turn id -> its usage (null: no model was called)
let pending = null;

const number = (value) => Number(value || 0).toLocaleString(state.locale);

function gauge(usage) {
  const context = Number(usage.contextTokens || 0);
  const window = Number(usage.contextWindow || 0);
  const share = window ? Math.round((100 * context) / window) : null;
  const text = `${say("context")} ${number(context)}${window ? ` ${say("of")} ${number(window)} (${share}%)` : ""} · ${number(usage.completionTokens)} ${say("written")}`;
  const details = `${number(usage.promptTokens)} ${say("read")}, ${number(usage.completionTokens)} ${say("written")}, ${usage.calls || 0} ${say("calls")}`;
  return el("span", { class: "turn-gauge", role: "group", "aria-label": say("label"), title: details,
                      "data-context": String(context), "data-window": String(window) },
    window ? el("meter", { min: "0", max: String(window), value: String(Math.min(context, window)), low: String(window * 0.6),
                           high: String(window * 0.85), optimum: "0", "aria-label": `${say("context")} ${share}%` }) : null,
    el("span", {}, text));
}

// The usage of turns not read yet: one GetTurn each for a few (a turn just played), else a page of the newest turns
// (a resumed story; a turn record is large, so the page is no longer than the story shown needs).
async function readUsage(missing) {
  const at = `/api/sessions/${state.session.id}/turns`;
  const turns = missing.length <= 3
    ? (await Promise.all(missing.map((id) => api("GET", `${at}/${encodeURIComponent(id)}`).then((r) => r.turn).catch(() => null)))).filter(Boolean)
    : (await api("GET", `${at}?pageSize=${Math.min(500, missing.length * 3 + 10)}&newestFirst=true`).catch(() => ({}))).turns || [];
  for (const turn of turns) usages.set(turn.id, turn.usage || null);
  for (const id of missing) if (!usages.has(id)) usages.set(id, null); // not found or older than the page read: no gauge
}

// The turns shown without a gauge yet: their usage read once, then drawn.
async function draw() {
  pending = null;
  if (!state.session) return;
  const last = new Map();
  for (const p of document.querySelectorAll("#story p[data-turn]")) last.set(p.dataset.turn, p);
  const missing = [...last.keys()].filter((id) => !usages.has(id));
  if (missing.length) await readUsage(missing);
  for (const [id, p] of last) {
    const usage = usages.get(id);
    if (!usage || p.querySelector(".turn-gauge")) continue;
    for (const old of document.querySelectorAll(`#story .turn-gauge[data-turn="${CSS.escape(id)}"]`)) old.remove();
    const shown = gauge(usage);
    shown.dataset.turn = id;
    p.append(shown);
  }
}

new MutationObserver(() => { if (!pending) pending = setTimeout(() => draw().catch(() => {}), 150); })
  .observe(document.getElementById("story"), { childList: true, subtree: true, attributes: true, attributeFilter: ["data-turn"] });

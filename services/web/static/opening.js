// Swipes of the opening (docs/web.md "Openings"): in a world with several openings (an imported card's alternate
// greetings), ‹ 2/3 › under the story's first message until the player's first action, over SelectOpening
// (POST .../opening). Uses app.js's globals: api, el, notice, fieldMessage, drawStory, state.
"use strict";

const WORDS = {
  en: { label: "Openings", shown: "Opening {n} of {count}", previous: "Previous opening", next: "Next opening" },
  zh: { label: "开场", shown: "第 {n} 个开场，共 {count} 个", previous: "上一个开场", next: "下一个开场" },
};
const say = (key, vars = {}) => String((WORDS[state.locale] || WORDS.en)[key]).replace(/\{(\w+)\}/g, (_, name) => vars[name] ?? "");
const worlds = new Map(); // world id -> its openings ([{id, text}], the world's own first)
const chosen = new Map(); // session id -> the index of its opening now
let pending = null;

async function openingsOf(worldId) {
  if (!worlds.has(worldId)) {
    const { world } = await api("GET", `/api/worlds/${encodeURIComponent(worldId)}?locale=${encodeURIComponent(state.locale)}`);
    worlds.set(worldId, [{ id: "" }, ...(world.openings || []).filter((o) => !o.groupOnly && o.text)]);
  }
  return worlds.get(worldId);
}

async function current(sessionId, all) {
  if (!chosen.has(sessionId)) {
    const { messages = [] } = await api("GET", `/api/sessions/${sessionId}/messages?pageSize=1`);
    const id = (messages[0] && messages[0].metadata && messages[0].metadata.openingId) || "";
    chosen.set(sessionId, Math.max(0, all.findIndex((o) => o.id === id)));
  }
  return chosen.get(sessionId);
}

async function swipe(all, index) {
  const session = state.session;
  try {
    await api("POST", `/api/sessions/${session.id}/opening`, { openingId: all[index].id });
    chosen.set(session.id, index);
    await drawStory();
    const again = document.getElementById(index > 0 ? "opening-swipe-prev" : "opening-swipe-next");
    if (again && !again.disabled) again.focus();
  } catch (error) {
    if (error.body && error.body.reason === "OPENING_PLAYED") chosen.set(session.id, -1);
    notice("error", fieldMessage(error));
    draw().catch(() => {});
  }
}

// Under the first message while the story has no player's line yet (the kernel refuses a swipe after the first turn).
async function draw() {
  pending = null;
  const old = document.getElementById("opening-swipe");
  const session = state.session;
  const story = document.getElementById("story");
  const first = story.querySelector("p");
  const open = session && session.worldId && first && !first.dataset.turn && !story.querySelector("p.player") && chosen.get(session.id) !== -1;
  if (!open) { if (old) old.remove(); return; }
  const all = await openingsOf(session.worldId);
  if (all.length < 2) { if (old) old.remove(); return; }
  const index = await current(session.id, all);
  const nav = el("nav", { id: "opening-swipe", "aria-label": say("label") },
    el("button", { type: "button", id: "opening-swipe-prev", "aria-label": say("previous"), onclick: () => swipe(all, index - 1), ...(index === 0 ? { disabled: "" } : {}) }, "‹"),
    el("span", { id: "opening-swipe-shown", "data-opening": all[index].id }, say("shown", { n: index + 1, count: all.length })),
    el("button", { type: "button", id: "opening-swipe-next", "aria-label": say("next"), onclick: () => swipe(all, index + 1), ...(index === all.length - 1 ? { disabled: "" } : {}) }, "›"));
  const again = document.getElementById("opening-swipe");
  if (again && again.isConnected && again.previousElementSibling === first && again.querySelector("span").textContent === nav.querySelector("span").textContent) return;
  if (again) again.remove();
  first.after(nav);
}

new MutationObserver(() => { if (!pending) pending = setTimeout(() => draw().catch(() => {}), 120); })
  .observe(document.getElementById("story"), { childList: true });

// Several players in one story (docs/web.md "Playing together"): the session's seats with Invite (a link carrying the
// one-time grant InviteToSeat returns) and Revoke for the owner, joining from such a link (#join=<grant>, JoinSeat),
// and the other players' turns shown as they are played (WatchSession: their actions, then the story as it streams).
// Uses app.js's globals: api, stream, el, notice, fieldMessage, state, openSession, addMessage, turnHandler, $.
"use strict";

const SEAT_WORDS = {
  en: { seats: "Seats", invite: "Invite", revoke: "Revoke", free: "free", you: "you", owner: "host", copy: "Copy link",
        linkFor: "Invitation link for seat {seat} (one use)", joined: "You joined seat {seat}", acts: "{who} acts" },
  zh: { seats: "座位", invite: "邀请", revoke: "收回", free: "空", you: "你", owner: "主人", copy: "复制链接",
        linkFor: "座位 {seat} 的邀请链接（仅限一次）", joined: "你加入了座位 {seat}", acts: "{who} 行动" },
};
const seatSay = (key, values = {}) => Object.entries(values).reduce((text, [name, value]) => text.replace(`{${name}}`, value),
  (SEAT_WORDS[state.locale] || SEAT_WORDS.en)[key] || key);
// The seat this browser plays in a session it joined as a guest (JoinSeat's answer); the owner plays main.
const mySeat = (sessionId) => localStorage.getItem(`covelSeat:${sessionId}`) || "main";
const seatsPath = (id) => `/api/sessions/${encodeURIComponent(id)}`;

function drawSeats(session) {
  let box = $("seats");
  if (!box) {
    box = el("section", { id: "seats", "aria-label": seatSay("seats") });
    $("play").insertBefore(box, $("notices"));
  }
  const seats = session.seats || [];
  box.hidden = seats.length < 2;
  const guest = mySeat(session.id) !== "main";
  const list = el("ul", {}, ...seats.map((seat) => {
    const who = seat.id === mySeat(session.id) ? seatSay("you") : seat.occupant || (seat.id === "main" ? seatSay("owner") : seatSay("free"));
    const item = el("li", { "data-seat": seat.id }, `${seat.id}: ${who}`);
    if (!guest && seat.id !== "main") {
      item.append(" ", el("button", { type: "button", "data-invite": seat.id, onclick: () => invite(session, seat.id) }, seatSay("invite")));
      if (seat.occupant) item.append(" ", el("button", { type: "button", "data-revoke": seat.id, onclick: () => revoke(session, seat.id) }, seatSay("revoke")));
    }
    return item;
  }));
  // The list only: an invitation link shown below it stays until the page leaves the session.
  if (box.querySelector("ul")) box.querySelector("ul").replaceWith(list);
  else box.replaceChildren(el("h3", {}, seatSay("seats")), list);
}

async function invite(session, seatId) {
  try {
    const { grant } = await api("POST", `${seatsPath(session.id)}/seats/${encodeURIComponent(seatId)}/invite`, {});
    const link = `${location.origin}${location.pathname}#join=${encodeURIComponent(grant)}`;
    const field = el("input", { type: "text", readonly: "", value: link, "data-invite-link": seatId, "aria-label": seatSay("linkFor", { seat: seatId }) });
    const copy = el("button", { type: "button", onclick: () => navigator.clipboard && navigator.clipboard.writeText(link) }, seatSay("copy"));
    $("seats").append(el("p", { class: "invite-link" }, field, " ", copy));
    field.select();
  } catch (error) { notice("error", fieldMessage(error)); }
}

async function revoke(session, seatId) {
  try {
    const { session: changed } = await api("POST", `${seatsPath(session.id)}/seats/${encodeURIComponent(seatId)}/revoke`, {});
    drawSeats(changed);
  } catch (error) { notice("error", fieldMessage(error)); }
}

async function joinFromLink() {
  const grant = decodeURIComponent((location.hash.match(/^#join=(.+)$/) || [])[1] || "");
  if (!grant) return;
  try {
    const { session, seatId } = await api("POST", "/api/seats/join", { grant });
    history.replaceState(null, "", location.pathname);
    localStorage.setItem(`covelSeat:${session.id}`, seatId);
    notice("info", seatSay("joined", { seat: seatId }));
    await openSession(session);
  } catch (error) {
    // Not signed in yet: the link stays, and joins once the page has a token (signing in reloads it).
    if (error.status !== 401) { history.replaceState(null, "", location.pathname); notice("error", fieldMessage(error)); }
  }
}

// The session's turns as they are played, whoever plays them; this browser's own turns it already streams itself.
async function watch(session, signal) {
  let others = null;
  await stream(`${seatsPath(session.id)}/watch-session`, {}, (name, data) => {
    if (name === "turnStarted") others = othersTurn(session, data);
    else if (others) others(name, data);
    if (name === "turnCompleted") {
      others = null;
      api("GET", seatsPath(session.id)).then(({ session: fresh }) => { if (fresh) drawSeats(fresh); }).catch(() => {});
    }
  }, signal);
}

// A turn another seat played: its actions as player lines naming who acted, then the story as it streams.
function othersTurn(session, started) {
  const actions = (started.actions || []).filter((action) => action.source !== "ACTION_SOURCE_SYSTEM");
  if (!actions.length || actions.every((action) => action.seatId === mySeat(session.id))) return null;
  const seats = new Map((state.session.seats || []).map((seat) => [seat.id, seat]));
  for (const action of actions) {
    const seat = seats.get(action.seatId);
    const who = (seat && seat.occupant) || (action.seatId === "main" ? seatSay("owner") : action.seatId);
    if (action.text) addMessage("player", `【${seatSay("acts", { who })}】${action.text}`);
  }
  return turnHandler();
}

let watching = null;
// Follow state.session: a new session (opened, joined, branched) gets its seats drawn and its own watch; who sits
// where is read again every few seconds (a guest who joined or left).
setInterval(() => {
  const session = state.session;
  if (session && !document.hidden && $("seats") && !$("seats").hidden) {
    api("GET", seatsPath(session.id)).then(({ session: fresh }) => { if (fresh && state.session.id === fresh.id) drawSeats(fresh); }).catch(() => {});
  }
}, 3000);
setInterval(() => {
  const session = state.session;
  if (!session || (watching && watching.id === session.id)) return;
  if (watching) watching.controller.abort();
  for (const old of document.querySelectorAll(".invite-link")) old.remove();
  watching = { id: session.id, controller: new AbortController() };
  drawSeats(session);
  api("GET", seatsPath(session.id)).then(({ session: fresh }) => { if (fresh) drawSeats(fresh); }).catch(() => {});
  watch(session, watching.controller.signal).catch(() => {});
}, 300);
joinFromLink();

// Webview panels (docs/web.md "Webview panels"): a plugin's own page in an iframe with sandbox="allow-scripts" and
// never allow-same-origin, so it runs with an opaque origin: no access to this page, its storage or the player's
// token. Its HTML comes from GetMedia (the plugin's webview folder only) and is given to the frame as srcdoc behind a
// content security policy of its own: its inline script and style, pictures as data: URLs, no network at all.
// The frame talks to the page only through postMessage, in this narrow contract:
//   frame -> page  {covel: 1, type: "state"}                                   the panel's own state, please
//                  {covel: 1, type: "action", id, action, args}                call one of its plugin's actions
//   page -> frame  {covel: 1, type: "state", panel, state}                     the answer to "state", and after each turn
//                  {covel: 1, type: "result", id, ok, result | error}          an action's answer
// A message is taken only from the frame's own window, with the opaque origin "null", of exactly this shape; the
// action always goes to the panel's own plugin (the scheduler refuses an action the plugin does not declare).

const CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; media-src data:; " +
            "font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'";
const ACTION = /^[A-Za-z0-9_.:-]{1,64}$/;
const ID = /^[A-Za-z0-9_.:-]{1,64}$/;
const MAX_ARGS = 16 * 1024;
const frames = new WeakMap(); // iframe -> {panel, busy}

// A panel redraw (after each turn) keeps each webview's frame, and so its page and what it holds: the frame moves
// into the new layout (Element.moveBefore keeps it running; where a browser lacks it, the page loads again) and is
// sent its panel's new state.
const live = new Map(); // "session plugin panel" -> iframe

export function webviewFrame(panel) {
  const key = `${state.session.id} ${panel.pluginId} ${panel.id || panel.webview.src}`;
  const kept = live.get(key);
  if (kept && kept.isConnected) {
    frames.get(kept).panel = panel;
    return el("span", { class: "webview-slot", "data-key": key });
  }
  const frame = el("iframe", { class: "webview", sandbox: "allow-scripts", referrerpolicy: "no-referrer",
                               title: panel.label || panel.id || panel.pluginId, "data-panel": panel.id || "" });
  mediaUrl(panel.webview.src, panel.pluginId).then((url) => fetch(url)).then((response) => response.text()).then((html) => {
    // The policy first, before anything of the page's (a policy can only narrow what a later one allows).
    frame.srcdoc = `<meta http-equiv="Content-Security-Policy" content="${CSP}">${html}`;
  }).catch((error) => frame.replaceWith(el("p", { class: "error" }, fieldMessage(error))));
  frames.set(frame, { panel, busy: false });
  live.set(key, frame);
  return frame;
}

function valid(data) {
  if (!data || typeof data !== "object" || Array.isArray(data) || data.covel !== 1) return false;
  if (data.type === "state") return Object.keys(data).length === 2;
  if (data.type !== "action" || !ID.test(String(data.id)) || !ACTION.test(String(data.action))) return false;
  if (data.args !== undefined && (typeof data.args !== "object" || data.args === null || Array.isArray(data.args))) return false;
  return JSON.stringify(data.args || {}).length <= MAX_ARGS && Object.keys(data).every((key) => ["covel", "type", "id", "action", "args"].includes(key));
}

window.addEventListener("message", async (event) => {
  const frame = [...document.querySelectorAll("iframe.webview")].find((f) => f.contentWindow === event.source);
  const known = frame && frames.get(frame);
  // Only a webview frame of this page (its own window object), sandboxed (origin "null"), in the contract's shape.
  if (!known || event.origin !== "null" || !valid(event.data)) return;
  const reply = (message) => event.source.postMessage({ covel: 1, ...message }, "*");
  const { panel } = known;
  if (event.data.type === "state") { reply({ type: "state", panel: panel.id || "", state: panel.state || {} }); return; }
  if (known.busy) { reply({ type: "result", id: event.data.id, ok: false, error: { code: "BUSY", message: "one action at a time" } }); return; }
  known.busy = true;
  try {
    const path = `/api/sessions/${state.session.id}/plugin-actions/${encodeURIComponent(panel.pluginId)}/${encodeURIComponent(event.data.action)}`;
    const answer = await api("POST", path, { payload: event.data.args || {}, idempotencyKey: newKey() });
    reply({ type: "result", id: event.data.id, ok: true, result: JSON.parse(answer.resultJson || "null") });
    refresh();
  } catch (error) {
    reply({ type: "result", id: event.data.id, ok: false, error: { code: (error.body && error.body.code) || "ERROR", message: error.message } });
  } finally { known.busy = false; }
});

// After a redraw: each kept frame takes its slot in the new layout and gets its panel's state.
function settle(box) {
  for (const slot of box.querySelectorAll(".webview-slot")) {
    const frame = live.get(slot.dataset.key);
    if (slot.parentNode.moveBefore) slot.parentNode.moveBefore(frame, slot); else slot.before(frame);
    slot.remove();
    const { panel } = frames.get(frame);
    if (frame.contentWindow) frame.contentWindow.postMessage({ covel: 1, type: "state", panel: panel.id || "", state: panel.state || {} }, "*");
  }
  for (const [key, frame] of live) if (!frame.isConnected && !box.contains(frame)) live.delete(key);
}

window.webviewFrame = webviewFrame;
window.covelWebview = { settle };

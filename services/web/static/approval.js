// Community plugins waiting for the player's approval (docs/web.md "Approving community plugins"): each with what
// its manifest lets its code do once approved (GetSessionPlugins' `community`: web origins it may call, runtimes,
// hooks, tools, actions, data, panels), and Approve, which calls SetPluginApprovals; it runs from the next turn.
// app.js calls drawApprovals() with each refresh.

const WORDS = {
  en: { title: "Waiting for your approval", intro: "A community plugin runs no code in this story until you approve it.",
        approve: "Approve", approved: "Approved: it runs from the next turn.", web: "May call on the web", noWeb: "Calls nothing on the web",
        runtimes: "Runs", version: "version" },
  zh: { title: "等待你的批准", intro: "社区插件在你批准之前不会在这个故事里运行任何代码。", approve: "批准", approved: "已批准：从下一回合起运行。",
        web: "可访问的网络地址", noWeb: "不访问网络", runtimes: "运行", version: "版本" },
};
const word = (key) => (WORDS[state.locale] || WORDS.en)[key];

function box() {
  let found = $("approvals");
  if (!found) {
    found = el("section", { id: "approvals", "aria-labelledby": "approvals-title" });
    $("notices").before(found);
  }
  return found;
}

function card(plugin) {
  const id = `approve-${plugin.pluginId}`;
  const what = [
    el("li", {}, plugin.http && plugin.http.length ? `${word("web")}: ${plugin.http.join("; ")}` : word("noWeb")),
    ...(plugin.runtimes && plugin.runtimes.length ? [el("li", {}, `${word("runtimes")}: ${plugin.runtimes.join(", ")}`)] : []),
    ...(plugin.contributes || []).map((line) => el("li", {}, line)),
  ];
  return el("article", { class: "approval", "data-plugin": plugin.pluginId, "aria-labelledby": `${id}-name` },
    el("h3", { id: `${id}-name` }, plugin.displayName || plugin.pluginId, el("span", { class: "kind" }, ` · ${plugin.pluginId} ${word("version")} ${plugin.version || ""}`)),
    plugin.description ? el("p", {}, plugin.description) : null,
    el("ul", { class: "permissions", "aria-label": `${plugin.displayName || plugin.pluginId}: permissions` }, ...what),
    el("button", { type: "button", id, "aria-describedby": `${id}-name`, onclick: () => approve(plugin) }, word("approve")));
}

export async function drawApprovals() {
  const { community = [] } = await api("GET", `/api/sessions/${state.session.id}/plugins`);
  const waiting = community.filter((plugin) => !plugin.approved);
  const shown = box();
  shown.hidden = waiting.length === 0;
  // Drawn again only when what waits changed: a redraw would take the focus from a keyboard user's Approve.
  const drawn = JSON.stringify([state.locale, waiting]);
  if (shown.dataset.drawn === drawn) return;
  shown.dataset.drawn = drawn;
  shown.replaceChildren(...(waiting.length ? [el("h2", { id: "approvals-title" }, word("title")), el("p", {}, word("intro")), ...waiting.map(card)] : []));
}

async function approve(plugin) {
  try {
    await api("POST", `/api/sessions/${state.session.id}/approvals`, { approve: [plugin.pluginId] });
    notice("success", `${plugin.displayName || plugin.pluginId}: ${word("approved")}`);
    await refresh();
  } catch (error) { notice("error", fieldMessage(error)); }
}

window.drawApprovals = drawApprovals;

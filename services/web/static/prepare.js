// The session's preparation (docs/web.md "Preparing a session"): before a session starts in a world, its pack and
// plugin plan (GET /api/worlds/{id}/plan): the plugins grouped by their cost:* tag, what does not run and why with
// the providers to open, a notice when no narrator would run, "back to the minimal set", a set changed by hand
// (the pack it came from remembered), each plugin's unrunnable tasks and ignored fields with "view reason", and
// author, license and links on the world's and the plugins' cards, a link opened only after a dialog shows it.
// Uses app.js's globals: api, el, notice, fieldMessage, openSession, state.
"use strict";

const WORDS = {
  en: { prepare: "Prepare…", prepareOf: "Prepare a session in {name}", title: "Prepare the session", back: "Back to the worlds",
        start: "Start the session", pack: "Pack", noPack: "No pack", worldsPack: "the world's", byHand: "Changed by hand, from the pack {pack}",
        byHandNone: "Changed by hand", minimal: "Back to the minimal set", costLlm: "Calls a model", costFunction: "Runs without a model",
        untagged: "No tags", core: "On by default", community: "Community", approve: "Approve its code", runs: "runs",
        off: "off", notRunning: "does not run: {why}", needs: "{plugin} does not run: it needs {contract}.", worldNeeds: "The world needs {contract}.",
        providers: "Provided by:", noProvider: "No installed plugin provides it.", open: "Open {name}", noStory: "No plugin would tell the story: turn on a narrator.",
        narrators: "Narrators:", missing: "{plugin} was asked for ({source}) but is not installed.", unrunnable: "Tasks that will not run",
        ignored: "Ignored in its manifest", viewReason: "View reason", reason: "Why", file: "File", field: "Field", code: "Code", hint: "Hint",
        close: "Close", by: "by {name}", license: "License: {license}", homepage: "Homepage", openLink: "Open this link?",
        linkUrl: "Full address", linkDomain: "Domain", openIt: "Open", cancel: "Cancel", badLink: "Only https and http links open.",
        opening: "Opening", openingShown: "Opening {n} of {count}", previousOpening: "Previous opening", nextOpening: "Next opening",
        tagLabels: { "ui:right-panel": "Side panel", "ui:message-block": "Message blocks", "ui:manual-action": "Can be used by hand" } },
  zh: { prepare: "准备……", prepareOf: "准备在{name}中开始", title: "准备这局故事", back: "回到世界列表", start: "开始", pack: "组合包",
        noPack: "不用组合包", worldsPack: "世界默认", byHand: "已手动修改，来自组合包 {pack}", byHandNone: "已手动修改", minimal: "回到最小集合",
        costLlm: "调用模型", costFunction: "不调用模型", untagged: "无标签", core: "默认启用", community: "社区", approve: "批准它的代码",
        runs: "运行", off: "关闭", notRunning: "不会运行：{why}", needs: "{plugin} 不会运行：它需要 {contract}。", worldNeeds: "世界需要 {contract}。",
        providers: "提供者：", noProvider: "没有已安装的插件提供它。", open: "打开 {name}", noStory: "没有插件会讲述故事：请打开一个叙述者。",
        narrators: "叙述者：", missing: "{plugin}（{source}）没有安装。", unrunnable: "不会运行的任务", ignored: "清单里被忽略的内容",
        viewReason: "查看原因", reason: "原因", file: "文件", field: "字段", code: "代码", hint: "提示", close: "关闭", by: "作者：{name}",
        license: "许可：{license}", homepage: "主页", openLink: "打开这个链接？", linkUrl: "完整地址", linkDomain: "域名", openIt: "打开",
        cancel: "取消", badLink: "只能打开 https 和 http 链接。", opening: "开场", openingShown: "第 {n} 个开场，共 {count} 个",
        previousOpening: "上一个开场", nextOpening: "下一个开场",
        tagLabels: { "ui:right-panel": "侧栏面板", "ui:message-block": "消息块", "ui:manual-action": "可手动使用" } },
};
const words = () => WORDS[state.locale] || WORDS.en;
const say = (key, vars = {}) => String(words()[key] || key).replace(/\{(\w+)\}/g, (_, name) => (vars[name] === undefined ? "" : vars[name]));
const prep = { world: null, packs: [], packId: "", custom: false, requested: [], excluded: [], approved: [], plan: null, opening: 0 };

const section = el("section", { id: "prepare", hidden: "", "aria-labelledby": "prepare-title" });
document.getElementById("start").after(section);

// ---- links: shown in full, with their domain (as the browser reads it: an international name in punycode), before they open ----

function linkButton(label, url) {
  return el("button", { type: "button", class: "link", "data-link": url, onclick: () => confirmLink(url) }, label);
}

function confirmLink(url) {
  let parsed = null;
  try { parsed = new URL(url); } catch { parsed = null; }
  const safe = parsed && ["https:", "http:"].includes(parsed.protocol);
  const dialog = el("dialog", { class: "confirm link-dialog", "aria-labelledby": "link-title" },
    el("h2", { id: "link-title" }, say("openLink")),
    el("p", {}, `${say("linkUrl")}: `, el("code", { class: "link-url" }, url)),
    el("p", {}, `${say("linkDomain")}: `, el("strong", { class: "link-domain" }, parsed ? parsed.hostname : "")),
    safe ? null : el("p", { class: "error", role: "alert" }, say("badLink")),
    el("form", { method: "dialog" },
      safe ? el("button", { type: "button", "data-open": url, onclick: () => { window.open(parsed.href, "_blank", "noopener,noreferrer"); dialog.close(); } }, say("openIt")) : null,
      el("button", { value: "cancel", autofocus: "" }, say("cancel"))));
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
}

// Who made it, its license and its links (the world's card and each plugin's).
function authorship(author, license, homepage) {
  const links = [];
  if (homepage) links.push(linkButton(say("homepage"), homepage));
  if (author && author.url) links.push(linkButton(author.name || author.url, author.url));
  for (const link of (author && author.links) || []) links.push(linkButton(link.label, link.url));
  if (!author && !license && !links.length) return null;
  return el("p", { class: "authorship" }, author && author.name ? el("span", {}, say("by", { name: author.name })) : null,
            license ? el("span", {}, say("license", { license })) : null, ...links);
}

// ---- diagnostics: "view reason" (file and field relative to the plugin) ----

function reasonDialog(plugin, diagnostic) {
  const row = (label, value) => (value ? [el("dt", {}, label), el("dd", {}, value)] : []);
  const dialog = el("dialog", { class: "confirm reason-dialog", "aria-labelledby": "reason-title" },
    el("h2", { id: "reason-title" }, `${plugin.name}: ${diagnostic.code}`),
    el("dl", {}, ...row(say("file"), diagnostic.file), ...row(say("field"), diagnostic.fieldPath), ...row(say("reason"), diagnostic.message),
       ...row(say("hint"), diagnostic.hint), ...row(say("code"), diagnostic.code)),
    el("form", { method: "dialog" }, el("button", { value: "close", autofocus: "" }, say("close"))));
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
}

function diagnosticsList(plugin, key) {
  const found = plugin[key] || [];
  if (!found.length) return null;
  return el("div", { class: `diagnostics ${key}` }, el("h5", {}, say(key)), el("ul", {}, ...found.map((d) => el("li", {},
    el("code", {}, [d.file, d.fieldPath].filter(Boolean).join(" · ")), " ",
    el("button", { type: "button", "data-reason": `${plugin.id}:${d.code}:${d.fieldPath || d.file}`, onclick: () => reasonDialog(plugin, d) }, say("viewReason"))))));
}

// ---- the plan ----

const cards = () => prep.plan.plugins || [];
const card = (id) => cards().find((c) => c.id === id);
const active = () => (prep.plan.resolution && prep.plan.resolution.active) || [];
const chosenOn = (c) => (c.kind === "core" ? !prep.excluded.includes(c.id) : prep.requested.includes(c.id));

// The group a plugin goes in: its cost:* tag; else its first tag (the author's come first); else "No tags".
function groupOf(c) {
  const tags = c.tags || [];
  return tags.find((tag) => tag.startsWith("cost:")) || tags[0] || "";
}

function groupLabel(tag) {
  if (tag === "cost:llm") return say("costLlm");
  if (tag === "cost:function") return say("costFunction");
  return tag ? tagLabel(tag) : say("untagged");
}

function tagLabel(tag) {
  if (tag === "cost:llm" || tag === "cost:function") return groupLabel(tag);
  return words().tagLabels[tag] || tag;
}

function openCard(id) {
  const found = section.querySelector(`[data-plugin-card="${CSS.escape(id)}"]`);
  if (!found) return;
  for (const old of section.querySelectorAll(".plugin-card.opened")) old.classList.remove("opened");
  found.classList.add("opened");
  found.scrollIntoView({ block: "center" });
  found.querySelector("input[data-toggle]").focus();
}

function openButtons(ids) {
  if (!ids.length) return [el("span", {}, say("noProvider"))];
  return [el("span", {}, say("providers")), ...ids.map((id) => el("button", { type: "button", "data-open-plugin": id, onclick: () => openCard(id) },
    say("open", { name: (card(id) || { name: id }).name })))];
}

const providersOf = (contract) => cards().filter((c) => c.loaded && (c.provides || []).includes(contract)).map((c) => c.id);

function problems() {
  const resolution = prep.plan.resolution || {};
  const shown = [];
  for (const gap of resolution.unavailable || []) {
    if (!gap.contract) continue;
    shown.push(el("li", { class: "unavailable", "data-unavailable": gap.pluginId },
      say("needs", { plugin: (card(gap.pluginId) || { name: gap.pluginId }).name, contract: gap.contract }), " ", ...openButtons(providersOf(gap.contract))));
  }
  for (const unmet of resolution.unmet || []) {
    shown.push(el("li", { class: "unmet", "data-unmet": unmet.contract }, say("worldNeeds", { contract: unmet.contract }), " ",
      ...openButtons(unmet.providers && unmet.providers.length ? unmet.providers : providersOf(unmet.contract))));
  }
  for (const missing of prep.plan.missing || []) shown.push(el("li", { class: "missing" }, say("missing", { plugin: missing.pluginId, source: missing.source })));
  return shown.length ? el("ul", { class: "plan-problems" }, ...shown) : null;
}

function narratorNotice() {
  const running = active();
  if (cards().some((c) => c.story && running.includes(c.id))) return null;
  const narrators = cards().filter((c) => c.story && c.loaded).map((c) => c.id);
  return el("div", { class: "notice warning no-story", role: "alert" }, say("noStory"), " ", el("span", {}, say("narrators")), " ", ...openButtons(narrators));
}

function whyNot(id) {
  const resolution = prep.plan.resolution || {};
  const found = [...(resolution.unavailable || []), ...(resolution.rejected || [])].find((r) => r.pluginId === id);
  return found ? found.reason || found.code : "";
}

function pluginCard(c) {
  const running = active().includes(c.id);
  const why = running ? "" : whyNot(c.id);
  const inputId = `plugin-${c.id}`;
  const toggle = el("input", { type: "checkbox", id: inputId, "data-toggle": c.id, onchange: (event) => changeByHand(c, event.target.checked) });
  toggle.checked = chosenOn(c) || running;
  if (!c.loaded) toggle.disabled = true;
  const approve = c.source === "community" ? el("label", { class: "approve" }, el("input", { type: "checkbox", "data-approve": c.id,
    onchange: (event) => approveCode(c.id, event.target.checked) }), ` ${say("approve")}`) : null;
  if (approve) approve.querySelector("input").checked = prep.approved.includes(c.id);
  return el("article", { class: `plugin-card${running ? " running" : ""}`, "data-plugin-card": c.id, "aria-labelledby": `${inputId}-name` },
    el("h4", {}, toggle, el("label", { for: inputId, id: `${inputId}-name` }, ` ${c.name}`),
       c.kind === "core" ? el("span", { class: "badge" }, say("core")) : null, c.source === "community" ? el("span", { class: "badge" }, say("community")) : null,
       el("span", { class: "state" }, running ? say("runs") : why ? say("notRunning", { why }) : say("off"))),
    c.description ? el("p", {}, c.description) : null,
    el("ul", { class: "tags" }, ...(c.tags || []).map((tag) => el("li", { "data-tag": tag }, tagLabel(tag)))),
    authorship(c.author, c.license, c.homepage), approve, diagnosticsList(c, "unrunnable"), diagnosticsList(c, "ignored"));
}

function groups() {
  const byGroup = new Map();
  for (const c of cards()) {
    const key = groupOf(c);
    if (!byGroup.has(key)) byGroup.set(key, []);
    byGroup.get(key).push(c);
  }
  const rank = (key) => (key === "cost:llm" ? 0 : key === "cost:function" ? 1 : key ? 2 : 3);
  const keys = [...byGroup.keys()].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return keys.map((key) => el("section", { class: "plugin-group", "data-group": key || "untagged" },
    el("h3", {}, groupLabel(key)), ...byGroup.get(key).map(pluginCard)));
}

function packChooser() {
  const fromPack = (prep.plan.pack && prep.plan.pack.id) || "";
  const worlds = (prep.world.pluginPolicy && prep.world.pluginPolicy.preset) || "";
  const options = [{ id: "", name: say("noPack") }, ...prep.packs];
  return el("fieldset", { class: "packs" }, el("legend", {}, say("pack")),
    ...options.map((pack) => {
      const highlighted = !prep.custom && pack.id === fromPack;
      return el("button", { type: "button", "data-pack": pack.id, "aria-pressed": String(highlighted), class: highlighted ? "chosen" : "",
                            onclick: () => choosePack(pack.id) }, pack.name + (pack.id && pack.id === worlds ? ` (${say("worldsPack")})` : ""));
    }),
    prep.custom ? el("p", { class: "by-hand", "data-from-pack": fromPack }, fromPack ? say("byHand", { pack: (prep.packs.find((p) => p.id === fromPack) || { name: fromPack }).name }) : say("byHandNone")) : null,
    el("button", { type: "button", id: "minimal", onclick: minimalSet }, say("minimal")));
}

// The world's openings (an imported card's first message and its alternate greetings; group-only ones are for group
// chats): ‹ n/m › to pick the one the session starts with (CreateSession's openingId).
function openings() {
  const world = prep.world;
  return [{ id: "", text: world.opening || "" }, ...(world.openings || []).filter((o) => !o.groupOnly)].filter((o, i) => i === 0 || o.text);
}

function openingChooser() {
  const all = openings();
  if (all.length < 2) return null;
  const step = (by) => { prep.opening = Math.min(all.length - 1, Math.max(0, prep.opening + by)); draw(); document.getElementById(by < 0 ? "opening-prev" : "opening-next").focus(); };
  const shown = all[prep.opening];
  return el("fieldset", { class: "openings" }, el("legend", {}, say("opening")),
    el("nav", { "aria-label": say("opening") },
      el("button", { type: "button", id: "opening-prev", "aria-label": say("previousOpening"), onclick: () => step(-1), ...(prep.opening === 0 ? { disabled: "" } : {}) }, "‹"),
      el("span", { id: "opening-shown", "aria-live": "polite", "data-opening": shown.id }, say("openingShown", { n: prep.opening + 1, count: all.length })),
      el("button", { type: "button", id: "opening-next", "aria-label": say("nextOpening"), onclick: () => step(1), ...(prep.opening === all.length - 1 ? { disabled: "" } : {}) }, "›")),
    el("blockquote", { id: "opening-text" }, shown.text));
}

function draw() {
  const world = prep.world;
  section.replaceChildren(...[
    el("h2", { id: "prepare-title" }, `${say("title")}: ${world.name || world.id}`),
    el("article", { class: "world-card", "data-world-card": world.id }, world.description ? el("p", {}, world.description) : null,
       authorship(world.author, world.license, world.homepage)),
    openingChooser(), packChooser(), narratorNotice(), problems(), ...groups(),
    el("p", { class: "prepare-actions" }, el("button", { type: "button", id: "prepare-start", onclick: start }, say("start")),
       el("button", { type: "button", id: "prepare-back", onclick: close }, say("back"))),
    el("p", { class: "error", id: "prepare-error", role: "alert" })].filter(Boolean));
}

async function loadPlan() {
  const query = new URLSearchParams({ locale: state.locale });
  if (prep.packId) query.set("packId", prep.packId);
  for (const id of prep.approved) query.append("approvedPlugins", id);
  if (prep.custom) {
    query.set("custom", "true");
    for (const id of prep.requested) query.append("requestedPlugins", id);
    for (const id of prep.excluded) query.append("excludedPlugins", id);
  }
  const { plan } = await api("GET", `/api/worlds/${encodeURIComponent(prep.world.id)}/plan?${query}`);
  prep.plan = plan;
  if (!prep.custom) { prep.requested = [...(plan.defaultPluginIds || [])]; prep.excluded = [...(plan.excluded || [])]; }
  const focused = document.activeElement && document.activeElement.dataset ? { ...document.activeElement.dataset } : {};
  draw();
  refocus(focused);
}

// After a redraw, the control that had the focus has it again (the same plugin's toggle, the same pack).
function refocus(focused) {
  const [name, value] = Object.entries(focused)[0] || [];
  if (!name) return;
  const attribute = name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  const again = section.querySelector(`[data-${attribute}="${CSS.escape(value)}"]`);
  if (again) again.focus();
}

const reload = () => loadPlan().catch((error) => { const shown = document.getElementById("prepare-error"); if (shown) shown.textContent = fieldMessage(error); });

function choosePack(packId) {
  prep.packId = packId;
  prep.custom = false;
  reload();
}

// A change by hand: the pack's highlight goes, the pack it came from is remembered (prep.packId, the plan's pack).
function changeByHand(c, on) {
  if (!prep.packId && prep.plan.pack) prep.packId = prep.plan.pack.id;
  prep.custom = true;
  prep.requested = prep.requested.filter((id) => id !== c.id);
  prep.excluded = prep.excluded.filter((id) => id !== c.id);
  if (on && c.kind !== "core") prep.requested.push(c.id);
  if (!on && (c.kind === "core" || active().includes(c.id))) prep.excluded.push(c.id);
  reload();
}

function approveCode(id, on) {
  prep.approved = prep.approved.filter((known) => known !== id);
  if (on) prep.approved.push(id);
  reload();
}

function minimalSet() {
  if (!prep.packId && prep.plan.pack) prep.packId = prep.plan.pack.id;
  prep.custom = true;
  prep.requested = [];
  prep.excluded = [];
  reload();
}

// The session starts with the set shown: the pack's and the world's requests the player dropped are excluded.
async function start() {
  const plan = prep.plan;
  const dropped = [...(plan.packRequested || []), ...(plan.worldPlus || [])].filter((id) => !prep.requested.includes(id));
  const body = { worldId: prep.world.id, locale: state.locale, requestedPlugins: prep.requested, approvedPlugins: prep.approved,
                 excludedPlugins: [...new Set([...prep.excluded, ...(prep.custom ? dropped : [])])] };
  if (prep.packId) body.packId = prep.packId;
  const opening = openings()[prep.opening];
  if (opening && opening.id) body.openingId = opening.id;
  try {
    const { session } = await api("POST", "/api/sessions", body);
    section.hidden = true;
    await openSession(session);
  } catch (error) { document.getElementById("prepare-error").textContent = fieldMessage(error); }
}

function close() {
  section.hidden = true;
  document.getElementById("start").hidden = false;
  const back = document.querySelector(`#worlds button[data-prepare="${CSS.escape(prep.world.id)}"]`);
  if (back) back.focus();
}

async function openPrepare(worldId) {
  const locale = encodeURIComponent(state.locale);
  const [{ world }, { packs = [] }] = await Promise.all([api("GET", `/api/worlds/${encodeURIComponent(worldId)}?locale=${locale}`),
    api("GET", `/api/packs?locale=${locale}`)]);
  Object.assign(prep, { world, packs, packId: "", custom: false, requested: [], excluded: [], approved: [], plan: null, opening: 0 });
  await loadPlan();
  document.getElementById("start").hidden = true;
  section.hidden = false;
  section.querySelector("h2").setAttribute("tabindex", "-1");
  section.querySelector("h2").focus();
}

// A "Prepare…" button beside each world app.js lists (its own button still starts at once).
function decorate(item) {
  const play = item.querySelector("button[data-world]");
  if (!play || item.querySelector("button[data-prepare]")) return;
  const name = play.querySelector("strong") ? play.querySelector("strong").textContent : play.dataset.world;
  item.append(el("button", { type: "button", class: "prepare", "data-prepare": play.dataset.world, "aria-label": say("prepareOf", { name }),
    onclick: () => openPrepare(play.dataset.world).catch((error) => notice("error", fieldMessage(error))) }, say("prepare")));
}

const worldsList = document.getElementById("worlds");
new MutationObserver(() => { for (const item of worldsList.children) decorate(item); }).observe(worldsList, { childList: true });
for (const item of worldsList.children) decorate(item);

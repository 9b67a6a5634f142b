// The plugins' panels laid out by their metadata (docs/ui.md "Panel fields"): one tab per `group` (ordered by
// the builtins' groups first: story, you, people, world; then others by name), the group's panels by `groupOrder`
// then label, each tab with its
// icon and short label. On a wide screen the tabs head the side column; on a narrow one the column is a drawer that
// the Panels button opens. app.js calls layoutPanels(panels) with ListPanels' answer (its hook in drawPanels).

const ICONS = { clock: "◷", scene: "⛫", music: "♪", quest: "⚑", person: "☺", bag: "⛁", dice: "⚄", people: "☷",
                heart: "♥", link: "⛓", book: "❦", globe: "◍", scroll: "☰", map: "⌖" };
const GROUPS = { en: { story: "Story", you: "You", people: "People", world: "World", other: "More", panels: "Panels", close: "Close" },
                 zh: { story: "故事", you: "你", people: "人物", world: "世界", other: "更多", panels: "面板", close: "关闭" } };
// A value longer than this gets its own line under its label (a stat row does not squeeze a sentence).
const LONG_VALUE = 24;
const KNOWN = ["story", "you", "people", "world"];
const shown = { group: null };

function words(key) { return (GROUPS[state.locale] || GROUPS.en)[key]; }
function groupName(group) { return words(group) || group.charAt(0).toUpperCase() + group.slice(1); }
function order(panel) { return panel.groupOrder || 0; }

// [[group, [panels]]] in the order the tabs show them.
export function groupsOf(panels) {
  const groups = new Map();
  for (const panel of panels) {
    const group = panel.group || "other";
    if (!groups.has(group)) groups.set(group, []);
    groups.get(group).push(panel);
  }
  for (const list of groups.values()) list.sort((a, b) => order(a) - order(b) || (a.label || "").localeCompare(b.label || ""));
  // The groups the builtins use in the page's order, then any other by name, panels without a group last.
  const rank = (group) => (KNOWN.includes(group) ? KNOWN.indexOf(group) : group === "other" ? KNOWN.length + 1 : KNOWN.length);
  return [...groups.entries()].sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
}

function tab(group, list, selected) {
  const icon = ICONS[list[0].icon] || "•";
  const title = list.map((panel) => panel.shortLabel || panel.label).filter(Boolean).join(", ");
  const button = el("button", { type: "button", role: "tab", id: `tab-${group}`, "aria-controls": `group-${group}`,
                                "aria-selected": String(selected), tabindex: selected ? "0" : "-1", title, "data-group": group,
                                onclick: () => select(group) },
                    el("span", { class: "icon", "aria-hidden": "true" }, icon), el("span", { class: "tab-label" }, groupName(group)));
  button.addEventListener("keydown", arrows);
  return button;
}

// Left/right (and Home/End) move between the tabs, as a tab list does.
function arrows(event) {
  const tabs = [...document.querySelectorAll("#panel-tabs [role=tab]")];
  const at = tabs.indexOf(event.currentTarget);
  const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 }[event.key];
  if (to === undefined) return;
  event.preventDefault();
  const next = tabs[(to + tabs.length) % tabs.length];
  select(next.dataset.group);
  next.focus();
}

function select(group) {
  shown.group = group;
  for (const button of document.querySelectorAll("#panel-tabs [role=tab]")) {
    const on = button.dataset.group === group;
    button.setAttribute("aria-selected", String(on));
    button.tabIndex = on ? 0 : -1;
  }
  for (const box of document.querySelectorAll("#panels [role=tabpanel]")) box.hidden = box.dataset.group !== group;
}

// Key/value rows whose value is a sentence: the value on a line of its own.
function unsqueeze(root) {
  for (const stat of root.querySelectorAll(".stat")) {
    const value = stat.querySelector("strong");
    stat.classList.toggle("long", !!value && value.textContent.length > LONG_VALUE);
  }
}

function panelSection(panel) {
  const section = el("section", { class: `panel ${shortName(panel.location, "UI_SLOT_")}`, "data-plugin": panel.pluginId,
                                  "data-panel": panel.id || "", "aria-label": panel.label || panel.pluginId }, ...panelBody(panel));
  unsqueeze(section);
  return section;
}

export function layoutPanels(panels) {
  const box = $("panels");
  box.hidden = panels.length === 0;
  $("panels-open").hidden = panels.length === 0;
  const groups = groupsOf(panels);
  if (!groups.some(([group]) => group === shown.group)) shown.group = groups.length ? groups[0][0] : null;
  const tabs = el("div", { id: "panel-tabs", role: "tablist", "aria-label": words("panels") },
                  ...groups.map(([group, list]) => tab(group, list, group === shown.group)));
  const close = el("button", { type: "button", id: "panels-close", "aria-label": words("close"), onclick: closeDrawer }, "×");
  const boxes = groups.map(([group, list]) => {
    const part = el("div", { role: "tabpanel", id: `group-${group}`, "aria-labelledby": `tab-${group}`, "data-group": group }, ...list.map(panelSection));
    part.hidden = group !== shown.group;
    return part;
  });
  // A redraw after each turn must not take the focus from a keyboard user who is in the panels.
  const focused = box.contains(document.activeElement) ? document.activeElement.id : "";
  // The new layout goes in before the old comes out, so that a webview's frame can move across (webview.js).
  const old = [...box.childNodes];
  box.append(el("div", { class: "panel-head" }, tabs, close), ...boxes);
  if (window.covelWebview) window.covelWebview.settle(box);
  for (const node of old) node.remove();
  if (focused) ($(focused) || $(`tab-${shown.group}`)).focus();
  if (window.covelMedia) window.covelMedia.panelsDrawn(box, panels);
}

// The narrow screen's drawer: the Panels button opens it over the story, × or Escape closes it.
function openDrawer() {
  document.body.classList.add("drawer-open");
  $("panels-open").setAttribute("aria-expanded", "true");
  const current = document.querySelector("#panel-tabs [aria-selected=true]");
  if (current) current.focus();
}

function closeDrawer() {
  if (!document.body.classList.contains("drawer-open")) return;
  document.body.classList.remove("drawer-open");
  $("panels-open").setAttribute("aria-expanded", "false");
  $("panels-open").focus();
}

$("panels-open").addEventListener("click", () => (document.body.classList.contains("drawer-open") ? closeDrawer() : openDrawer()));
document.addEventListener("keydown", (event) => { if (event.key === "Escape") closeDrawer(); });
window.layoutPanels = layoutPanels;

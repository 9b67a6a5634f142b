// The session list's moves (docs/web.md "Your sessions"): Rename and Delete beside each session app.js lists
// (#mine), over RenameSession (POST .../rename) and EndSession with SESSION_ENDING_DELETED (POST .../end).
// Uses app.js's globals: api, el, notice, fieldMessage, listMine, state.
"use strict";

const WORDS = {
  en: { rename: "Rename", delete: "Delete", newTitle: "New title", save: "Save", keep: "Keep it", cancel: "Cancel",
        deleteTitle: "Delete this session?", deleteText: "“{title}”: its story, its turns and everything it recorded are deleted for good. This cannot be undone.",
        deleted: "Session deleted", renamed: "Session renamed", renameOf: "Rename {title}", deleteOf: "Delete {title}" },
  zh: { rename: "重命名", delete: "删除", newTitle: "新标题", save: "保存", keep: "保留", cancel: "取消",
        deleteTitle: "删除这个故事？", deleteText: "“{title}”：它的故事、回合和记录的一切都会被永久删除，无法恢复。",
        deleted: "已删除", renamed: "已重命名", renameOf: "重命名 {title}", deleteOf: "删除 {title}" },
};
const say = (key, title = "") => ((WORDS[state.locale] || WORDS.en)[key] || key).replace("{title}", title);
const path = (id) => `/api/sessions/${encodeURIComponent(id)}`;

// The title a listed session shows: its button's text before the " · <date>".
function shownTitle(open) { return open.textContent.replace(/ · [^·]*$/, ""); }

function decorate(item) {
  const open = item.querySelector("button[data-session]");
  if (!open || item.querySelector(".session-moves")) return;
  const id = open.dataset.session;
  item.append(el("span", { class: "session-moves" },
    el("button", { type: "button", "data-rename": id, "aria-label": say("renameOf", shownTitle(open)), onclick: () => renameForm(item, open) }, say("rename")),
    el("button", { type: "button", "data-delete": id, "aria-label": say("deleteOf", shownTitle(open)), onclick: () => confirmDelete(open) }, say("delete"))));
}

// An inline form in place of the row: the title to edit, Save (Enter) and Cancel (Escape).
function renameForm(item, open) {
  const id = open.dataset.session;
  const inputId = `rename-${id}`;
  const input = el("input", { id: inputId, type: "text", maxlength: "500", required: "" });
  input.value = shownTitle(open);
  const error = el("span", { class: "error", role: "alert" });
  const form = el("form", { class: "rename", "data-renaming": id },
    el("label", { for: inputId }, say("newTitle")), input,
    el("button", { type: "submit" }, say("save")),
    el("button", { type: "button", onclick: () => { form.replaceWith(...kept); open.focus(); } }, say("cancel")), error);
  const kept = [...item.childNodes];
  item.replaceChildren(form);
  form.addEventListener("keydown", (event) => { if (event.key === "Escape") { form.replaceWith(...kept); open.focus(); } });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await api("POST", `${path(id)}/rename`, { title: input.value });
      notice("success", say("renamed"));
      await listMine();
      const again = document.querySelector(`#mine button[data-session="${CSS.escape(id)}"]`);
      if (again) again.focus();
    } catch (failed) { error.textContent = fieldMessage(failed); input.focus(); }
  });
  input.focus();
  input.select();
}

// A real delete (docs/api.md EndSession): asked first, in a dialog naming the session.
function confirmDelete(open) {
  const id = open.dataset.session;
  const dialog = el("dialog", { class: "confirm", "aria-labelledby": "delete-title", "data-deleting": id },
    el("h2", { id: "delete-title" }, say("deleteTitle")),
    el("p", {}, say("deleteText", shownTitle(open))),
    el("p", { class: "error", role: "alert" }),
    el("form", { method: "dialog" },
      el("button", { type: "button", class: "danger", "data-confirm": "delete", onclick: () => remove(id, dialog) }, say("delete")),
      el("button", { value: "keep", autofocus: "" }, say("keep"))));
  dialog.addEventListener("close", () => { dialog.remove(); if (open.isConnected) open.focus(); });
  document.body.append(dialog);
  dialog.showModal();
}

async function remove(id, dialog) {
  try {
    await api("POST", `${path(id)}/end`, { reason: "SESSION_ENDING_DELETED" });
  } catch (failed) {
    // NOT_FOUND: already gone (a second click, another tab): deleted all the same.
    if (failed.status !== 404) { dialog.querySelector(".error").textContent = fieldMessage(failed); return; }
  }
  if (localStorage.getItem("covelSession") === id) {
    localStorage.removeItem("covelSession");
    document.getElementById("resume").hidden = true;
  }
  dialog.close();
  notice("success", say("deleted"));
  await listMine();
}

const mine = document.getElementById("mine");
new MutationObserver(() => { for (const item of mine.children) decorate(item); }).observe(mine, { childList: true });
for (const item of mine.children) decorate(item);

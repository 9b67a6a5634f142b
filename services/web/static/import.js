// Import a character card or a lorebook as a world (docs/web.md "Importing a card"): a file chosen on the page goes
// to POST /api/worlds/import (ImportWorld, base64), which only an operator may call (the world is every player's);
// anyone else reads the API's reason. A world of the same id already there: "Replace it" sends it again with replace.
// Uses app.js's globals: api, el, fieldMessage, boot, state.
"use strict";

const WORDS = {
  en: { importCard: "Import a card or lorebook…", importing: "Importing {name}…", imported: "Imported: {name}", replace: "Replace it",
        fileLabel: "A character card (PNG, JSON, CHARX) or a lorebook (JSON)", tooBig: "{name} is {size} MB; a card may be at most 24 MB." },
  zh: { importCard: "导入角色卡或世界书……", importing: "正在导入 {name}……", imported: "已导入：{name}", replace: "替换它",
        fileLabel: "角色卡（PNG、JSON、CHARX）或世界书（JSON）", tooBig: "{name} 有 {size} MB；角色卡最多 24 MB。" },
};
const say = (key, vars = {}) => String((WORDS[state.locale] || WORDS.en)[key]).replace(/\{(\w+)\}/g, (_, name) => vars[name] ?? "");
const MAX_BYTES = 24 * 1024 * 1024;

const input = el("input", { type: "file", id: "import-file", accept: ".png,.json,.charx,application/json,image/png", class: "sr" });
const label = el("label", { for: "import-file", class: "sr" }, say("fileLabel"));
const button = el("button", { type: "button", id: "import", onclick: () => input.click() }, say("importCard"));
const status = el("p", { class: "error", id: "import-error", role: "alert" });
// The start screen has no notices of its own (they are the story's): what was imported is said here.
const done = el("p", { id: "import-done", role: "status" });
const box = el("div", { class: "import" }, label, input, button, done, status);
document.getElementById("worlds").after(box);

// The file's bytes as base64 (protobuf's JSON form of `bytes`).
function base64(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

async function send(file, replace) {
  status.textContent = "";
  done.textContent = "";
  if (file.size > MAX_BYTES) { status.textContent = say("tooBig", { name: file.name, size: (file.size / 1048576).toFixed(1) }); return; }
  button.disabled = true;
  button.textContent = say("importing", { name: file.name });
  try {
    const { world } = await api("POST", "/api/worlds/import", { file: await base64(file), ...(replace ? { replace: true } : {}) });
    done.textContent = say("imported", { name: world.name || world.id });
    await boot();
    const started = document.querySelector(`#worlds button[data-world="${CSS.escape(world.id)}"]`);
    if (started) started.focus();
  } catch (error) {
    status.textContent = fieldMessage(error);
    if (error.body && error.body.reason === "WORLD_EXISTS") {
      status.append(" ", el("button", { type: "button", id: "import-replace", onclick: () => send(file, true) }, say("replace")));
    }
  } finally {
    button.disabled = false;
    button.textContent = say("importCard");
  }
}

input.addEventListener("change", () => {
  const [file] = input.files;
  input.value = "";
  if (file) send(file, false);
});

// Pictures and sound (docs/web.md "Pictures and sound"): a panel's `image` and `audio` nodes draw files of the
// session's world, fetched with the player's token from GET /api/sessions/{id}/media?path=… (the kernel serves only
// what the world's media[] declares) and shown from blob: URLs. A backdrop also heads the story; music plays in one
// player in the header, which survives the panels' redraws and starts only when the player presses Play.

const urls = new Map(); // "session path" -> Promise of a blob: URL
const WORDS = { en: { play: "Play music", pause: "Pause music", nothing: "No music" }, zh: { play: "播放音乐", pause: "暂停音乐", nothing: "没有音乐" } };
const word = (key) => (WORDS[state.locale] || WORDS.en)[key];
const music = { audio: null, src: "", title: "" };

// A relative path of the world's package; an absolute URL (or anything else) is not fetched by this page.
const isWorldPath = (src) => !!src && !/^[a-z][a-z0-9+.-]*:/i.test(src) && !src.startsWith("/") && !src.split("/").includes("..");

export function mediaUrl(src, pluginId = "") {
  const key = `${state.session.id} ${pluginId} ${src}`;
  if (!urls.has(key)) {
    const query = new URLSearchParams({ path: src, ...(pluginId ? { pluginId } : {}) });
    urls.set(key, fetch(`/api/sessions/${state.session.id}/media?${query}`, { headers: headers() }).then(async (response) => {
      if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => ({})));
      return URL.createObjectURL(await response.blob());
    }));
    urls.get(key).catch(() => urls.delete(key));
  }
  return urls.get(key);
}

// app.js's drawNode hook for `image` and `audio`: prop(name) is the node's prop with its bindings filled.
export function mediaNode(kind, prop) {
  const src = prop("src");
  if (!isWorldPath(src)) return el("span", { class: "no-media" });
  if (kind === "audio") return trackButton(src, prop("title") || src);
  const role = prop("role") || "portrait";
  const image = el("img", { class: `media ${role}`, alt: prop("alt") || "", "data-src": src, decoding: "async" });
  mediaUrl(src).then((url) => {
    image.src = url;
    if (role === "backdrop") showBackdrop(url, prop("alt"));
  }).catch(() => image.remove());
  return image;
}

function showBackdrop(url, alt) {
  let figure = $("backdrop");
  if (!figure) {
    figure = el("figure", { id: "backdrop" }, el("img", { alt: "" }));
    $("story").before(figure);
  }
  const image = figure.querySelector("img");
  image.src = url;
  image.alt = alt || "";
}

// ---- music ----------------------------------------------------------------------------------------

function trackButton(src, title) {
  const playing = music.src === src && music.audio && !music.audio.paused;
  return el("button", { type: "button", class: "track", "data-track": src, "aria-pressed": String(playing),
                        "aria-label": `${playing ? word("pause") : word("play")}: ${title}`, onclick: () => toggle(src, title) },
            playing ? "❚❚" : "▶");
}

async function toggle(src, title) {
  if (music.src === src && music.audio && !music.audio.paused) { music.audio.pause(); return; }
  if (music.src !== src || !music.audio) {
    const url = await mediaUrl(src);
    if (!music.audio) {
      music.audio = new Audio();
      music.audio.loop = true;
      for (const event of ["play", "pause"]) music.audio.addEventListener(event, syncButtons);
    }
    music.audio.src = url;
    music.src = src;
    music.title = title;
  }
  await music.audio.play().catch((error) => notice("error", error.message));
  syncButtons();
}

function syncButtons() {
  const playing = music.audio && !music.audio.paused;
  for (const button of document.querySelectorAll("button.track")) {
    const on = playing && button.dataset.track === music.src;
    button.setAttribute("aria-pressed", String(on));
    button.textContent = on ? "❚❚" : "▶";
    button.setAttribute("aria-label", `${on ? word("pause") : word("play")}: ${button.getAttribute("aria-label").split(": ").slice(1).join(": ")}`);
  }
  const header = $("music");
  header.hidden = !music.audio;
  header.textContent = playing ? `♪ ${music.title}` : word("play");
  header.setAttribute("aria-pressed", String(!!playing));
  header.setAttribute("aria-label", playing ? `${word("pause")}: ${music.title}` : `${word("play")}: ${music.title}`);
}

// The header's button: pause and resume what plays, whatever panel is open.
$("music").addEventListener("click", () => { if (music.audio) (music.audio.paused ? music.audio.play() : music.audio.pause()); });

// After each panel redraw: a track that is playing but no longer the panel's stays until the player pauses it;
// one the panel switched to takes over once music has played (the player already chose to hear it).
function panelsDrawn(box) {
  // A session (or a scene) without a backdrop shows none, not the last one's.
  if (!box.querySelector("img.media.backdrop") && $("backdrop")) $("backdrop").remove();
  const buttons = [...box.querySelectorAll("button.track")];
  const wanted = buttons[0];
  if (wanted && music.audio && !music.audio.paused && wanted.dataset.track !== music.src) {
    toggle(wanted.dataset.track, wanted.getAttribute("aria-label").split(": ").slice(1).join(": "));
  }
  syncButtons();
}

window.mediaNode = mediaNode;
window.mediaUrl = mediaUrl;
window.covelMedia = { panelsDrawn, music };

// Markdown in story text, a small safe subset (docs/web.md "Markdown in the story"): **bold**, *italic* or _italic_,
// ~~struck~~, `code`, [a link](https://…) and line breaks. It builds DOM nodes (text nodes and a fixed set of
// elements), never HTML from the text: markup written in the story (<script>, <img onerror=…>) stays text, and a
// link is made only for http:, https: and mailto: addresses (javascript:, data: and the rest stay text).

const SAFE_URL = /^(https?:\/\/|mailto:)[^\s<>"'`]+$/i;
// Tried in this order at each place of the text; the first that matches there wins.
const RULES = [
  { tag: "code", re: /^`([^`\n]+)`/, plain: true },
  { tag: "strong", re: /^\*\*(?=\S)([\s\S]*?\S)\*\*/ },
  { tag: "strong", re: /^__(?=\S)([\s\S]*?\S)__(?!\w)/ },
  { tag: "del", re: /^~~(?=\S)([\s\S]*?\S)~~/ },
  { tag: "em", re: /^\*(?=[^\s*])([\s\S]*?[^\s*])\*(?!\*)/ },
  { tag: "em", re: /^_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/ },
  { tag: "a", re: /^\[([^\[\]\n]+)\]\(([^()\s]+)\)/ },
];
const MAX_DEPTH = 4;

// The text as nodes: elements for the marks above, text nodes for everything else.
export function inline(text, depth = 0) {
  const nodes = [];
  let plain = "";
  const flush = () => { if (plain) { nodes.push(document.createTextNode(plain)); plain = ""; } };
  let at = 0;
  while (at < text.length) {
    const rest = text.slice(at);
    const char = text[at];
    if (char === "\n") { flush(); nodes.push(document.createElement("br")); at += 1; continue; }
    if (char === "\\" && /^\\[\\`*_~\[\]()]/.test(rest)) { plain += rest[1]; at += 2; continue; }
    const hit = "`*_~[".includes(char) && depth < MAX_DEPTH ? match(rest, at === 0 ? "" : text[at - 1]) : null;
    if (!hit) { plain += char; at += 1; continue; }
    flush();
    nodes.push(element(hit, depth));
    at += hit.found[0].length;
  }
  flush();
  return nodes;
}

function match(rest, before) {
  for (const rule of RULES) {
    // _emphasis_ only at a word's edge: snake_case_names stay as written.
    if (rule.re.source.startsWith("^_") && /\w/.test(before)) continue;
    const found = rule.re.exec(rest);
    if (found) return { rule, found };
  }
  return null;
}

function element({ rule, found }, depth) {
  if (rule.tag === "a") {
    const url = found[2];
    if (!SAFE_URL.test(url)) return document.createTextNode(found[0]);
    const link = document.createElement("a");
    link.href = url;
    link.rel = "noopener noreferrer nofollow";
    link.target = "_blank";
    link.append(...inline(found[1], depth + 1));
    return link;
  }
  const node = document.createElement(rule.tag);
  if (rule.plain) node.textContent = found[1]; else node.append(...inline(found[1], depth + 1));
  return node;
}

// A finished story paragraph drawn again with its marks (the speaker's label kept).
export function renderParagraph(paragraph) {
  if (paragraph.dataset.md) return;
  const speaker = paragraph.querySelector(":scope > .speaker");
  const text = [...paragraph.childNodes].filter((node) => node !== speaker).map((node) => node.textContent).join("");
  paragraph.replaceChildren(...(speaker ? [speaker] : []), ...inline(text));
  paragraph.dataset.md = "1";
}

window.storyInline = inline;
window.renderParagraph = renderParagraph;

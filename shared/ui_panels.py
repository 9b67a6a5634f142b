"""Plugin UI panels: the JSON view specs of `contributes.ui` (docs/ui.md), their component catalogue, the
checks the registry runs at load, and a plain-text rendering (covel play's summaries; the web player renders
the same tree as HTML).

A spec's `view` is a node (the spec's metadata and `webview`: shared/ui_panel_specs.py). A node is `{"type": <component>, ...props}`; containers have `children`. A string
prop may hold bindings, `{{ /json/pointer }}` into the panel's state (ListPanels: `{data, world, session}`) or,
inside a `list`, `{{ $item.field }}` / `{{ $key }}` of the item being drawn. A `list` repeats its children over
`repeat.statePath` (a JSON pointer to an array, or to an object whose values are drawn in key order).
"""

from __future__ import annotations

import re
from typing import Any

LOCATIONS = ("right", "message", "view", "segment")
# component -> the props it takes (besides `type`); containers also take `children`.
COMPONENTS: dict[str, tuple[str, ...]] = {
    "stack": ("title",),
    "row": (),
    "heading": ("text",),
    "text": ("text", "tone"),
    "stat": ("label", "value"),
    "progress": ("label", "value", "max"),
    "badge": ("text", "tone"),
    "list": ("repeat", "empty"),
    # Media of the session's world (its media[] paths; docs/ui.md "Pictures and sound"): a picture, and a sound with
    # a player control. Text clients draw neither.
    "image": ("src", "alt", "role"),
    "audio": ("src", "title"),
}
# What an image is for: a portrait beside a name, the scene's backdrop (the web player also sets it behind the story), an icon.
IMAGE_ROLES = ("portrait", "backdrop", "icon")
CONTAINERS = ("stack", "row", "list")
TONES = ("neutral", "good", "bad", "warning")
MAX_DEPTH = 8
MAX_NODES = 200
# Lines a text rendering keeps (a list draws at most this many items).
MAX_ITEMS = 50
# What a text client (covel play) shows for a `webview` panel; the web player runs the page in a sandboxed frame (docs/ui.md).
WEBVIEW_PLACEHOLDER = "This panel is a page of the plugin's own; this client does not show it."
BINDING = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")
POINTER = re.compile(r"^(/([^/~]|~[01])*)*$")
ITEM_REF = re.compile(r"^\$(item(\.[A-Za-z0-9_-]+)*|key)$")


def check_view_node(view: Any) -> list[tuple[str, str]]:
    """(path, problem) for each thing wrong with a spec's `view` tree; [] when it can be drawn. The spec as a
    whole (metadata, `view` or `webview`) is checked by shared/ui_panel_specs.check_spec."""
    problems: list[tuple[str, str]] = []
    count = [0]
    _check_node(view, "view", 0, False, problems, count)
    return problems


def _check_node(node: Any, path: str, depth: int, in_list: bool, problems: list, count: list[int]) -> None:
    count[0] += 1
    if count[0] > MAX_NODES or depth > MAX_DEPTH:
        if count[0] == MAX_NODES + 1 or depth == MAX_DEPTH + 1:
            problems.append((path, f"a view has at most {MAX_NODES} nodes, nested at most {MAX_DEPTH} deep"))
        return
    if not isinstance(node, dict) or node.get("type") not in COMPONENTS:
        kind = node.get("type") if isinstance(node, dict) else node
        problems.append((f"{path}.type", f"{kind!r} is not a component; use one of {', '.join(COMPONENTS)}"))
        return
    kind = node["type"]
    allowed = {"type", *COMPONENTS[kind], *(("children",) if kind in CONTAINERS else ())}
    problems.extend((f"{path}.{key}", f"`{kind}` takes no `{key}` (it takes {', '.join(sorted(allowed - {'type'}))})")
                    for key in node if key not in allowed)
    for key, value in node.items():
        if isinstance(value, str):
            problems.extend(_binding_problems(value, f"{path}.{key}", in_list))
    if "tone" in node and node["tone"] not in TONES:
        problems.append((f"{path}.tone", f"one of {', '.join(TONES)}"))
    if "role" in node and node["role"] not in IMAGE_ROLES:
        problems.append((f"{path}.role", f"one of {', '.join(IMAGE_ROLES)}"))
    if kind in ("image", "audio") and not isinstance(node.get("src"), str):
        problems.append((f"{path}.src", "the file: a path of the world's media[] or a binding to one, e.g. {{ $item.media.portrait.src }}"))
    if kind == "list":
        repeat = node.get("repeat")
        if not isinstance(repeat, dict) or not isinstance(repeat.get("statePath"), str) or not POINTER.match(repeat["statePath"]):
            problems.append((f"{path}.repeat.statePath", "a JSON pointer into the panel's state, e.g. /data/items"))
    children = node.get("children", [])
    if kind in CONTAINERS and not isinstance(children, list):
        problems.append((f"{path}.children", "a list of nodes"))
        return
    for index, child in enumerate(children if kind in CONTAINERS else []):
        _check_node(child, f"{path}.children[{index}]", depth + 1, in_list or kind == "list", problems, count)


def _binding_problems(text: str, path: str, in_list: bool) -> list[tuple[str, str]]:
    problems = []
    for reference in BINDING.findall(text):
        if ITEM_REF.match(reference):
            if not in_list:
                problems.append((path, f"`{{{{ {reference} }}}}` is only drawn inside a `list`"))
        elif not POINTER.match(reference) or not reference.startswith("/"):
            problems.append((path, f"`{{{{ {reference} }}}}`: write a JSON pointer (/data/items) or $item.<field> / $key"))
    return problems


def resolve(state: Any, pointer: str) -> Any:
    """The value at a JSON pointer, or None."""
    value = state
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def items_at(state: Any, pointer: str) -> list[tuple[str, Any]]:
    """(key, item) pairs a `list` draws: an array's items by index, an object's values in key order."""
    found = resolve(state, pointer)
    if isinstance(found, list):
        return [(str(index), item) for index, item in enumerate(found)]
    if isinstance(found, dict):
        return sorted(found.items())
    return []


def bind(text: str, state: Any, item: Any = None, key: str = "") -> str:
    """A string prop with its bindings filled in (a missing value is empty)."""

    def value_of(match: re.Match) -> str:
        reference = match.group(1)
        if reference == "$key":
            found: Any = key
        elif reference.startswith("$item"):
            found = item
            for part in reference.split(".")[1:]:
                found = found.get(part) if isinstance(found, dict) else None
        else:
            found = resolve(state, reference)
        return "" if found is None else found if isinstance(found, str) else _scalar(found)

    return BINDING.sub(value_of, text)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value) if not isinstance(value, (dict, list)) else ""


def render_text(spec: dict[str, Any], state: Any) -> list[str]:
    """The panel as short text lines (a terminal's summary of it)."""
    title = spec.get("label") or spec.get("id") or ""
    if "view" not in spec:
        return [title or "panel", WEBVIEW_PLACEHOLDER]
    if is_empty(spec, state):
        return [title, spec["emptyState"]["message"]] if title else [spec["emptyState"]["message"]]
    lines: list[str] = []
    _render(spec["view"], state, None, "", lines)
    return [line for line in lines if line.strip()]


def is_empty(spec: dict[str, Any], state: Any) -> bool:
    """True when the spec names a dataSource and an emptyState and that namespace holds nothing yet."""
    namespace = (spec.get("dataSource") or {}).get("namespace")
    if not namespace or not (spec.get("emptyState") or {}).get("message"):
        return False
    data = state.get("data") if isinstance(state, dict) else None
    return not (data or {}).get(namespace)


def _render(node: dict[str, Any], state: Any, item: Any, key: str, lines: list[str]) -> None:
    kind = node["type"]

    def prop(name: str) -> str:
        value = node.get(name)
        return bind(value, state, item, key) if isinstance(value, str) else _scalar(value) if value is not None else ""

    if kind in ("heading", "text", "badge"):
        lines.append(prop("text"))
    elif kind == "stat":
        lines.append(f"{prop('label')}: {prop('value')}")
    elif kind == "progress":
        lines.append(f"{prop('label')}: {prop('value')}/{prop('max')}")
    elif kind == "list":
        drawn = items_at(state, node["repeat"]["statePath"])[:MAX_ITEMS]
        if not drawn and node.get("empty"):
            lines.append(prop("empty"))
        for item_key, value in drawn:
            parts: list[str] = []
            for child in node.get("children", []):
                _render(child, state, value, item_key, parts)
            lines.append(" · ".join(part for part in parts if part.strip()))
        return
    if kind in ("stack", "row"):
        if node.get("title"):
            lines.append(prop("title"))
        parts = []
        for child in node.get("children", []):
            _render(child, state, item, key, parts if kind == "row" else lines)
        if kind == "row":
            lines.append(" · ".join(part for part in parts if part.strip()))

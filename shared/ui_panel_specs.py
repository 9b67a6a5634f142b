"""A panel spec file as a whole (docs/ui.md): its metadata and exactly one of `view` (a component tree,
shared/ui_panels.py) or `webview` (a page of the plugin's own, drawn in a sandboxed frame).

    {"id": "standing", "group": "people", "label": "Standing", "shortLabel": "Std", "icon": "heart",
     "groupOrder": 2, "dataSource": {"namespace": "scores"}, "emptyState": {"message": "No one yet."},
     "view": {...}}                       # or "webview": {"src": "./standing.html", "sandbox": ["allow-scripts"]}

These checks are pure: whether a webview's page exists in the package is the registry's check.
"""

from __future__ import annotations

import re
from typing import Any

from shared import ui_panels

TEXT_FIELDS = ("id", "group", "label", "shortLabel", "icon")
FIELDS = frozenset({*TEXT_FIELDS, "groupOrder", "dataSource", "emptyState", "view", "webview"})
PANEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
MAX_TEXT = 200
# The iframe sandbox tokens a webview may ask for. Never allow-same-origin (with allow-scripts a frame can lift its
# own sandbox and read the player's page), nor top navigation or escaping popups (it could replace the page).
SANDBOX_ALLOWED = ("allow-scripts", "allow-forms", "allow-popups", "allow-modals", "allow-downloads", "allow-pointer-lock")
SANDBOX_REFUSED = ("allow-same-origin", "allow-top-navigation", "allow-top-navigation-by-user-activation",
                   "allow-top-navigation-to-custom-protocols", "allow-popups-to-escape-sandbox",
                   "allow-storage-access-by-user-activation", "allow-presentation", "allow-orientation-lock")
DEFAULT_SANDBOX = ("allow-scripts",)


def check_spec(spec: Any) -> list[tuple[str, str]]:
    """(node path, problem) for each thing wrong with a panel spec; [] when it can be served."""
    if not isinstance(spec, dict):
        return [("", "a panel spec is a JSON object")]
    problems = [(key, f"a panel spec takes no `{key}` (it takes {', '.join(sorted(FIELDS))})") for key in spec if key not in FIELDS]
    problems.extend(_metadata_problems(spec))
    kinds = [key for key in ("view", "webview") if key in spec]
    if len(kinds) != 1:
        problems.append(("", "a panel spec declares exactly one of `view` or `webview`"))
    elif kinds == ["view"]:
        problems.extend(ui_panels.check_view_node(spec["view"]))
    else:
        problems.extend(webview_problems(spec["webview"]))
    return problems


def _metadata_problems(spec: dict[str, Any]) -> list[tuple[str, str]]:
    problems = []
    for key in TEXT_FIELDS:
        value = spec.get(key)
        if key in spec and (not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT):
            problems.append((key, f"text of 1 to {MAX_TEXT} characters"))
    if isinstance(spec.get("id"), str) and not PANEL_ID.match(spec["id"]):
        problems.append(("id", "letters, digits, `_ . : -`, at most 64, starting with a letter or digit"))
    order = spec.get("groupOrder")
    if "groupOrder" in spec and (isinstance(order, bool) or not isinstance(order, (int, float)) or order != int(order)):
        problems.append(("groupOrder", "a whole number (panels of a group are shown by it, smallest first)"))
    problems.extend(_object_with_text(spec, "dataSource", "namespace", "the plugin data namespace the panel shows"))
    problems.extend(_object_with_text(spec, "emptyState", "message", "the text shown while that namespace is empty"))
    return problems


def _object_with_text(spec: dict[str, Any], key: str, field: str, what: str) -> list[tuple[str, str]]:
    if key not in spec:
        return []
    value = spec[key]
    if not isinstance(value, dict) or set(value) != {field}:
        return [(key, f"an object with one key, `{field}`: {what}")]
    if not isinstance(value[field], str) or not value[field].strip() or len(value[field]) > MAX_TEXT:
        return [(f"{key}.{field}", f"text of 1 to {MAX_TEXT} characters: {what}")]
    return []


def webview_of(spec: dict[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """(page path as written, sandbox tokens) of a checked spec's webview; None for a view."""
    webview = spec.get("webview")
    if isinstance(webview, str):
        return webview, DEFAULT_SANDBOX
    if isinstance(webview, dict):
        return webview["src"], tuple(webview.get("sandbox", DEFAULT_SANDBOX))
    return None


def webview_problems(webview: Any) -> list[tuple[str, str]]:
    if isinstance(webview, str):
        webview = {"src": webview}
    if not isinstance(webview, dict):
        return [("webview", "the page's path (\"./page.html\") or {src, sandbox?}")]
    problems = [(f"webview.{key}", "a webview takes `src` and `sandbox`") for key in webview if key not in ("src", "sandbox")]
    src = webview.get("src")
    if not isinstance(src, str) or not src.endswith((".html", ".htm")):
        problems.append(("webview.src", "the path of an .html page in the package, relative to this spec file"))
    sandbox = webview.get("sandbox", list(DEFAULT_SANDBOX))
    if not isinstance(sandbox, list) or not all(isinstance(token, str) for token in sandbox):
        return [*problems, ("webview.sandbox", f"a list of iframe sandbox tokens: {', '.join(SANDBOX_ALLOWED)}")]
    for index, token in enumerate(sandbox):
        if token in SANDBOX_REFUSED:
            problems.append((f"webview.sandbox[{index}]", f"`{token}` would let the page leave its sandbox; a webview may use "
                             + ", ".join(SANDBOX_ALLOWED)))
        elif token not in SANDBOX_ALLOWED:
            problems.append((f"webview.sandbox[{index}]", f"`{token}` is not an iframe sandbox token; use {', '.join(SANDBOX_ALLOWED)}"))
    return problems

"""ListPanels: the contributes.ui panels of a session's running plugins, each with the state it draws from
(docs/ui.md). The registry checked the specs at load; this reads the state, never plugin code.

A panel's state is `{data, world, session}`: `data` the plugin's own plugin data of the session
(`{namespace: {key: value}}`, without `_`-namespaces: hidden and kernel data stay out), `world` the seat's
character (`protagonist`, or null) and the world's dimension values (`dimensions: {id: value}`), `session`
its phase, completed player turns and locale. The spec's texts are translated by the plugin's `messages`
(locales/<locale>.yaml) in the session's locale; its metadata is also served as the Panel's typed fields.
"""

from __future__ import annotations

import posixpath
from typing import Any

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Package
from services.scheduler.plugin_locale import messages, translate_texts
from services.scheduler.public_api import public_enum
from shared.errors import invalid_argument
from shared.structs import from_struct, from_value, to_struct
from shared.ui_panel_specs import webview_of
from shared.ui_panels import LOCATIONS, is_empty


def check_location(location: str) -> None:
    if location and location not in LOCATIONS:
        raise invalid_argument("location", f"{location!r} is no panel location; one of {', '.join(LOCATIONS)}, or empty for all")


def plugin_data(entries: list[store_pb2.PluginDataEntry]) -> dict[str, dict[str, dict[str, Any]]]:
    """{plugin: {namespace: {key: value}}} of the entries a player may see."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for entry in entries:
        if not entry.namespace.startswith("_"):
            found.setdefault(entry.plugin_id, {}).setdefault(entry.namespace, {})[entry.key] = from_value(entry.value)
    return found


def world_state(session: store_pb2.Session, world: store_pb2.GetWorldResponse) -> dict[str, Any]:
    seat = next((s for s in session.seats if s.id == "main"), None)
    playing = seat.character_id if seat is not None else ""
    protagonist = next(({**from_struct(c.data), "id": c.id} for c in world.characters if c.id == playing), None) if playing else None
    return {"protagonist": protagonist, "dimensions": {d.id: from_value(d.value) for d in world.dimensions}}


def session_panels(packages: list[Package], session: store_pb2.Session, world: store_pb2.GetWorldResponse,
                   entries: list[store_pb2.PluginDataEntry], location: str = "") -> list[scheduler_pb2.Panel]:
    data = plugin_data(entries)
    shared = {"world": world_state(session, world),
              "session": {"phase": session.phase, "completedPlayerTurns": session.completed_player_turns, "locale": session.locale}}
    panels = []
    for package in sorted(packages, key=lambda p: p.id):
        for panel in package.ui_panels:
            if location and panel.location != location:
                continue
            state = {"data": data.get(package.id, {}), **shared}
            spec = translate_texts(from_struct(panel.spec), messages(package, session.locale))
            message = scheduler_pb2.Panel(plugin_id=package.id, location=public_enum(resources_pb2.UiSlot, panel.location), file=panel.file,
                                          spec=to_struct(spec), state=to_struct(state))
            _describe(message, spec, panel.file, state)
            panels.append(message)
    return panels


def _describe(message: scheduler_pb2.Panel, spec: dict[str, Any], file: str, state: dict[str, Any]) -> None:
    """The spec's metadata as the Panel's typed fields."""
    message.id, message.group, message.label = spec.get("id", ""), spec.get("group", ""), spec.get("label", "")
    message.short_label, message.icon = spec.get("shortLabel", ""), spec.get("icon", "")
    message.group_order = int(spec.get("groupOrder", 0))
    message.data_source_namespace = (spec.get("dataSource") or {}).get("namespace", "")
    message.empty_state_message = (spec.get("emptyState") or {}).get("message", "")
    message.empty = is_empty(spec, state)
    webview = webview_of(spec)
    if webview is not None:
        src, sandbox = webview
        message.webview.src = posixpath.normpath(posixpath.join(posixpath.dirname(file), src))
        message.webview.sandbox.extend(sandbox)

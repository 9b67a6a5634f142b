"""What a runtime shows the player besides the story: notifications, UI blocks and interactions (forms,
choices, confirmations), checked where a runtime gives them and typed for clients (store.proto
Notification, UiBlock, Interaction). docs/plugins.md#effects describes them.
"""

from __future__ import annotations

from typing import Any

from covel.scheduler.internal.v1 import turn_events_pb2
from covel.store.v1 import store_pb2
from shared.ids import new_id
from shared.structs import to_struct

LEVELS = ("info", "success", "warning", "error")
SLOTS = ("message", "right", "view", "segment")
INTERACTION_KINDS = ("form", "choice", "confirm")
TEXT_MAX = 2000
TITLE_MAX = 200
ID_MAX = 100
PARTS_MAX = 50
OPTIONS_MAX = 20


class ShownInvalid(ValueError):
    """A notification, UI block or interaction that does not have the documented shape."""


def _text(item: dict[str, Any], key: str, where: str, limit: int, *, required: bool = False) -> str:
    value = item.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()) or len(value) > limit:
        need = "a non-empty string" if required else "a string"
        raise ShownInvalid(f"{where}.{key} must be {need} of at most {limit} characters")
    return value


def _one_of(item: dict[str, Any], key: str, where: str, allowed: tuple[str, ...]) -> str:
    value = item.get(key, allowed[0])
    if value not in allowed:
        raise ShownInvalid(f"{where}.{key} is {value!r}; one of {', '.join(allowed)}")
    return value


def notification(item: dict[str, Any], where: str) -> store_pb2.Notification:
    return store_pb2.Notification(level=_one_of(item, "level", where, LEVELS), text=_text(item, "text", where, TEXT_MAX, required=True),
                                  title=_text(item, "title", where, TITLE_MAX))


def ui_block(item: dict[str, Any], where: str) -> store_pb2.UiBlock:
    parts = item.get("parts")
    if not isinstance(parts, list) or len(parts) > PARTS_MAX or not all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in parts):
        raise ShownInvalid(f"{where}.parts must be an array of at most {PARTS_MAX} objects, each with a `type`")
    return store_pb2.UiBlock(id=_text(item, "id", where, ID_MAX), slot=_one_of(item, "slot", where, SLOTS),
                             title=_text(item, "title", where, TITLE_MAX), parts=[to_struct(part) for part in parts])


def interaction(item: dict[str, Any], where: str, *, resumes: bool = False) -> store_pb2.Interaction:
    """`resumes`: a suspended agent asked it (its answer resumes that agent)."""
    kind = _one_of(item, "kind", where, INTERACTION_KINDS)
    shown = store_pb2.Interaction(id=_text(item, "id", where, ID_MAX) or new_id(), kind=kind, title=_text(item, "title", where, TITLE_MAX),
                                  resumes=resumes,
                                  prompt=_text(item, "prompt", where, TEXT_MAX, required=kind != "form"),
                                  form_id=_text(item, "formId", where, ID_MAX), action_kind=_text(item, "actionKind", where, ID_MAX))
    if kind == "form":
        schema = item.get("schema")
        if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
            raise ShownInvalid(f"{where}.schema must be a JSON Schema object with properties (the form's fields)")
        # A Struct keeps no key order: fieldOrder keeps the form's, as its author wrote it.
        shown.spec.CopyFrom(to_struct({"schema": schema, "fieldOrder": list(schema["properties"])}))
    elif kind == "choice":
        options = item.get("options")
        if (not isinstance(options, list) or not 1 <= len(options) <= OPTIONS_MAX
                or not all(isinstance(o, dict) and isinstance(o.get("id"), str) and isinstance(o.get("label"), str) for o in options)):
            raise ShownInvalid(f"{where}.options must be 1-{OPTIONS_MAX} objects {{id, label}}")
        shown.spec.CopyFrom(to_struct({"options": options}))
    return shown


TYPED = {"notifications": notification, "ui": ui_block, "interactions": interaction}
# The effects channels the player is shown (a handler's effects, an agent's tools).
SHOWN_CHANNELS = tuple(TYPED)


def check_shown(channel: str, items: Any) -> None:
    """Raises ShownInvalid unless `items` is an array of objects each with its channel's shape (naming the first that is not)."""
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ShownInvalid(f"effects.{channel} must be an array of objects")
    for index, item in enumerate(items):
        TYPED[channel](item, f"effects.{channel}[{index}]")


def add_shown(result: store_pb2.RuntimeResult, shown: dict[str, list[dict[str, Any]]], *, resumes: bool = False) -> None:
    """The checked effects on the runtime's result, typed, with the runtime as their source."""
    for index, item in enumerate(shown.get("notifications", [])):
        told = notification(item, f"notifications[{index}]")
        told.plugin_id, told.runtime_id = result.plugin_id, result.runtime_id
        result.notifications.append(told)
    for index, item in enumerate(shown.get("ui", [])):
        block = ui_block(item, f"ui[{index}]")
        block.plugin_id, block.runtime_id = result.plugin_id, result.runtime_id
        result.ui.append(block)
    for index, item in enumerate(shown.get("interactions", [])):
        asked = interaction(item, f"interactions[{index}]", resumes=resumes)
        asked.plugin_id, asked.runtime_id = result.plugin_id, result.runtime_id
        result.interactions.append(asked)


def shown_events(committed: store_pb2.Turn) -> list:
    """The committed turn's notifications, UI blocks and interactions as turn events, runtime by runtime (the
    store dropped those of units that did not commit)."""
    events = []
    for result in committed.runtime_results:
        events += [turn_events_pb2.TurnEvent(notification=item) for item in result.notifications]
        events += [turn_events_pb2.TurnEvent(ui=item) for item in result.ui]
        events += [turn_events_pb2.TurnEvent(interaction=item) for item in result.interactions]
    return events

"""A handler's answer as a FunctionOutcome: its business value, and HandlerResult's effects and completion
(spec: 结果的三个部分). The value never causes a side effect, whatever its keys are called; effects do:
proposals, events and pluginData are buffered like ctx.propose / ctx.emit_event / ctx.plugin_data writes
(committed with the runtime's unit, only if it succeeds); notifications, ui and interactions are shown to
the player once the turn commits. A malformed channel fails the runtime with output-schema-invalid.
"""

from __future__ import annotations

from typing import Any

from services.scheduler.execution.player_effects import SHOWN_CHANNELS, ShownInvalid, check_shown
from services.scheduler.kinds import ProposalType
from shared.ids import new_id
from shared.plugin_sdk.private_payload import json_copy
from shared.plugin_sdk.values import COMPLETIONS

CHANNELS = ("proposals", "events", "pluginData", "interactions", "notifications", "ui")
REMOVED = {"statePatches": "effects.statePatches was removed: write the plugin's own state with effects.pluginData"}
MAX_SHOWN = 20


class EffectsInvalid(ValueError):
    """A HandlerResult whose effects or completion break the spec's rules (the runtime fails)."""


def check_effects(effects: Any) -> dict[str, list[dict[str, Any]]]:
    """Every channel a list of objects (ui blocks with a list of object parts); unknown channels refused."""
    if not isinstance(effects, dict):
        raise EffectsInvalid("effects must be an object of channels")
    checked: dict[str, list[dict[str, Any]]] = {}
    for name, items in effects.items():
        if name in REMOVED:
            raise EffectsInvalid(REMOVED[name])
        if name not in CHANNELS:
            raise EffectsInvalid(f"effects.{name} is not a channel; the channels are {', '.join(CHANNELS)}")
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise EffectsInvalid(f"effects.{name} must be an array of objects")
        if name in SHOWN_CHANNELS:
            if len(items) > MAX_SHOWN:
                raise EffectsInvalid(f"effects.{name}: {len(items)} items; at most {MAX_SHOWN}")
            try:
                check_shown(name, items)
            except ShownInvalid as error:
                raise EffectsInvalid(str(error)) from None
        checked[name] = json_copy(items)
    return checked


def check_completion(completion: Any) -> str | None:
    if completion is not None and completion not in COMPLETIONS:
        raise EffectsInvalid(f"completion is {completion!r}; one of {', '.join(COMPLETIONS)}")
    return completion


def buffer_effects(context: Any, effects: dict[str, list[dict[str, Any]]]) -> None:
    """proposals, events and pluginData through the handler's own ctx (the same checks as its calls)."""
    try:
        for item in effects.get("proposals", []):
            context.propose(str(item.get("type")), item.get("payload"))
        for item in effects.get("events", []):
            context.emit_event(item.get("topic"), item.get("payload"))
        for item in effects.get("pluginData", []):
            if item.get("delete") is True:
                context.plugin_data.buffer(ProposalType.PLUGIN_DATA_DELETE, {"namespace": item.get("namespace"), "key": item.get("key")})
            elif "value" in item:
                context.plugin_data.buffer(ProposalType.PLUGIN_DATA, {"namespace": item.get("namespace"), "key": item.get("key"), "value": item["value"]})
            else:
                raise ValueError("effects.pluginData: each item is {namespace, key, value} or {namespace, key, delete: true}")
    except ValueError as error:
        raise EffectsInvalid(str(error)) from None


def shown_effects(effects: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {name: effects[name] for name in SHOWN_CHANNELS if effects.get(name)}


def suspended_outcome_parts(asked: Any) -> dict[str, list[dict[str, Any]]]:
    """The one interaction a Suspend asks, checked like an effect's (EffectsInvalid when it is not one)."""
    if not isinstance(asked, dict):
        raise EffectsInvalid("Suspend(interaction): the interaction must be an object")
    asked = json_copy(asked)
    asked["id"] = str(asked.get("id") or new_id())
    try:
        check_shown("interactions", [asked])
    except ShownInvalid as error:
        raise EffectsInvalid(f"Suspend: {error}") from None
    return {"interactions": [asked]}

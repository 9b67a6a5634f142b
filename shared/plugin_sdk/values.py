"""What a function handler returns, where Python's spelling differs from the spec's.

A handler that returns nothing (or `None`) gives no value: its output is `{}`, no export is
recorded and required inputs bound to it gate their consumers. To give the business value JSON
null (projected as `{"value": null}`, checked against the output contract like any value), return
`NULL`:

    from shared.plugin_sdk.values import NULL

    def handler(ctx):
        return NULL
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class _JsonNull:
    """The JSON null a handler returns as its value (distinct from returning nothing)."""

    _instance: _JsonNull | None = None

    def __new__(cls) -> _JsonNull:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NULL"

    def __bool__(self) -> bool:
        return False


NULL = _JsonNull()


class _NoValue:
    """HandlerResult.value when the handler gives no business value."""

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE = _NoValue()
COMPLETIONS = ("done", "pending")


class HandlerResult:
    """A handler's result with more than a value: its business value (leave it out for none; NULL for JSON
    null), its explicit side effects, and, for a setup runtime, whether its work is done:

        from shared.plugin_sdk.values import HandlerResult

        def handler(ctx):
            return HandlerResult({"greeted": True},
                                 effects={"notifications": [{"level": "info", "text": "Welcome!"}]},
                                 completion="done")

    effects: {proposals: [{type, payload}], events: [{topic, payload?}], pluginData: [{namespace, key, value}
    or {namespace, key, delete: true}], interactions: [{...}], notifications: [{...}], ui: [{parts: [{...}]}]}.
    A business value holding keys named like these has no effect: only effects do.
    """

    __slots__ = ("completion", "effects", "value")

    def __init__(self, value: object = NO_VALUE, *, effects: dict | None = None, completion: str | None = None) -> None:
        self.value = value
        self.effects = effects
        self.completion = completion

    def __repr__(self) -> str:
        return f"HandlerResult(value={self.value!r}, effects={self.effects!r}, completion={self.completion!r})"


class Suspend:
    """A handler's way to wait for the player: return Suspend({kind: form | choice | confirm, ...}) (an interaction
    as in effects.interactions). The runtime is suspended; what it wrote so far is held. Answering the interaction
    runs the handler again (ctx.execution["origin"] == "resume", the answer in ctx.activation["resume"]); if that
    run succeeds, the held writes commit with its own."""

    __slots__ = ("interaction",)

    def __init__(self, interaction: dict) -> None:
        self.interaction = interaction

    def __repr__(self) -> str:
        return f"Suspend({self.interaction!r})"


def result_message(result: object) -> dict:
    """What a handler returned, as the worker sends it to the host: {kind: none | null | value, v?, effects?, completion?}."""
    if isinstance(result, Suspend):
        return {"kind": "suspend", "interaction": result.interaction}
    effects = completion = None
    if isinstance(result, HandlerResult):
        effects, completion = result.effects, result.completion
        result = None if result.value is NO_VALUE else result.value
    message: dict = {"kind": "none"} if result is None else {"kind": "null"} if result is NULL else {"kind": "value", "v": result}
    if effects is not None:
        message["effects"] = effects
    if completion is not None:
        message["completion"] = completion
    return message


def with_pending_proposals(ctx: Any, result: Any, proposals: Iterable[Mapping[str, Any]]) -> Any:
    """A guard's skip result with proposals hung on it (the spec's withPendingProposals): each {type, payload} is
    proposed through ctx, and like every write of a guard commits only when the guard skips the runtime."""
    for proposal in proposals:
        ctx.propose(proposal["type"], proposal["payload"])
    return result

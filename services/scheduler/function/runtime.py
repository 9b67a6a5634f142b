"""Run a function runtime: import its `handler.py`, call `handler(ctx)`, shape its value.

A handler is plugin code: whatever it raises or however long it hangs, the runtime fails
(with the reason) and nothing of it commits; the kernel goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from services.scheduler.execution.outcome import OutcomeStatus
from services.scheduler.execution.plugin_data_view import PluginDataView
from services.scheduler.function.handler_result import (
    EffectsInvalid,
    buffer_effects,
    check_completion,
    check_effects,
    shown_effects,
    suspended_outcome_parts,
)
from shared.logs import get_logger
from shared.plugin_code import PluginFile, load_callable
from shared.plugin_data.execution_view import BufferedWrite
from shared.plugin_sdk import CancellationSignal, json_copy
from shared.plugin_sdk.plugin_log import PluginLog
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.plugin_sdk.values import result_message
from shared.plugin_threads import in_plugin_thread
from shared.sandbox.function_context import FUNCTION_PROPOSAL_TYPES

log = get_logger(component="function_runtime")


@dataclass
class FunctionContext:
    runtime_id: str
    plugin_id: str
    inputs: MappingProxyType
    player_message: str
    player_actions: tuple
    logical_turn: int
    execution: MappingProxyType
    recursion_depth: int
    random: SeededRandom
    plugin_data: PluginDataView
    signal: CancellationSignal
    user_settings: MappingProxyType
    # What a manual run's caller (or the events that triggered it) handed this execution.
    activation: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    # Events this runtime emits; they take effect (and trigger followers) only if it succeeds.
    emitted: list = field(default_factory=list)
    # await ctx.recursive_call(runtime_id, input): a nested run of a same-package function runtime.
    recursive_call: Any = None
    # ctx.world (frozen world views), ctx.store (get_session(), plugin data), ctx.tools.call(name, args),
    # ctx.gateway (generate_text / generate_object): function/services.py.
    world: Any = None
    store: Any = None
    tools: Any = None
    gateway: Any = None
    # Hook trace entries of its tool calls, recorded with the turn.
    trace: list = field(default_factory=list)
    # The monotonic time the handler must finish by (function.timeoutMs), set when it starts.
    deadline: float = 0.0
    # await ctx.agents.run({target, brief, data?, budget?}): a subagent (function runtimes only).
    agents: Any = None
    # await ctx.http.get(url): HTTP limited to permissions.http (shared/plugin_sdk/http_client.py).
    http: Any = None
    # ctx.log.info(message, **fields): the plugin's log lines (shared/plugin_sdk/plugin_log.py), set in __post_init__.
    log: Any = None
    # await ctx.services.call(contract, args): another plugin's service (covel.register_service).
    services: Any = None
    # await ctx.progress.report(job_id, label, done=, total=) / finish(job_id, status): progress.py.
    progress: Any = None
    # ctx.session: {lastPlayerInput} (a PlayerInputSubmission or None), frozen when the execution started.
    session: Any = None
    # await ctx.history_for(character_id, limit=): the story a character witnessed (execution/character_history.py).
    history_for: Any = None
    # The plugin's `messages` (locales/<locale>.yaml) in the session's locale: the SDK's translate(ctx, text) reads them.
    messages: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.log is None:
            self.log = PluginLog(self.plugin_id)

    def propose(self, type: str, payload: Any) -> None:
        """A world or data proposal of this runtime (character.upsert, character.schema.set,
        dimension.initialize/update, plugin.data*), committed with the runtime's unit and checked there."""
        if type not in FUNCTION_PROPOSAL_TYPES:
            raise ValueError(f"propose({type!r}): a function may propose {', '.join(FUNCTION_PROPOSAL_TYPES)}")
        if not isinstance(payload, dict):
            raise ValueError(f"propose({type!r}): the payload is an object")
        self.plugin_data.own.append(BufferedWrite(self.runtime_id, type, json_copy(payload)))
        if hasattr(self.world, "buffer"):
            self.world.buffer(type, payload)  # later reads of ctx.world see it (execution/world_view.py WorldView)

    def emit_event(self, topic: str, payload: Any = None) -> None:
        if not isinstance(topic, str) or not re.match(r"^[A-Za-z0-9._:/-]{1,120}$", topic):
            raise ValueError(f"emit_event({topic!r}): a topic is letters, digits and . _ : / -")
        self.emitted.append({"topic": topic, "payload": json_copy(payload)})


@dataclass
class FunctionOutcome:
    status: OutcomeStatus
    reason: str = ""
    output: dict[str, Any] = field(default_factory=dict)
    canonical_value: Any = None
    has_value: bool = False
    writes: list[dict[str, Any]] = field(default_factory=list)
    read_from: set[str] = field(default_factory=set)
    events: list = field(default_factory=list)
    duration_ms: int = 0
    # HandlerResult: what the player is shown (notifications, ui, interactions) and the completion signal.
    shown: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    completion: str | None = None
    # Suspend: what the held run keeps until the answer runs the handler again (its writes and events).
    suspension: dict[str, Any] | None = None


def project_value(value: Any) -> dict[str, Any]:
    """An object is the output; a scalar, array or null is {value} (spec: Function 的输出)."""
    if isinstance(value, dict):
        return json_copy(value)
    return {"value": json_copy(value)}


async def run_function(
    context: FunctionContext, code: PluginFile, limit_ms: int, entry: str = "handler", turn_id: str | None = None
) -> FunctionOutcome:
    """`limit_ms`: the compiled function.timeoutMs (a guard: guardTimeoutMs); `turn_id`: the loader's epoch."""
    started = time.monotonic()

    def finished(outcome: FunctionOutcome) -> FunctionOutcome:
        outcome.duration_ms = int((time.monotonic() - started) * 1000)
        return outcome

    context.deadline = started + limit_ms / 1000
    try:
        handler = load_callable(code, entry, epoch=turn_id)
        if inspect.iscoroutinefunction(handler):
            result = await asyncio.wait_for(handler(context), limit_ms / 1000)
        else:
            # A plain `def handler(ctx)` runs in a worker thread under the same time limit, so a slow
            # one fails its runtime instead of blocking every turn on this scheduler. (A thread cannot
            # be killed: one that overruns is abandoned, ctx.signal aborted, and nothing of it commits;
            # it holds a slot of the plugin pool, not of the default executor, until it returns.)
            result = await asyncio.wait_for(in_plugin_thread(handler, context), limit_ms / 1000)
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, max(context.deadline - time.monotonic(), 0.001))
    except asyncio.CancelledError:
        context.signal.abort("cancelled")
        raise
    except TimeoutError:
        context.signal.abort("timeout")
        return finished(FunctionOutcome(OutcomeStatus.FAILED, f"function.timeoutMs: the handler did not finish within {limit_ms} ms"))
    except Exception as error:
        log.warning("function.failed", runtime_id=context.runtime_id, error=repr(error), exc_info=True)
        return finished(FunctionOutcome(OutcomeStatus.FAILED, f"handler raised {type(error).__name__}: {error}"))
    return finished(outcome_of(context, result_message(result)))


def outcome_of(context: FunctionContext, answer: Any) -> FunctionOutcome:
    """A handler's answer ({kind: none | null | value, v?, effects?, completion?}, values.result_message) as its outcome."""
    if isinstance(answer, dict) and answer.get("kind") == "suspend":
        return suspended_outcome(context, answer.get("interaction"))
    if not isinstance(answer, dict) or answer.get("kind") not in ("none", "null", "value"):
        return FunctionOutcome(OutcomeStatus.FAILED, "the handler's worker answered something that is not a result")
    try:
        effects = check_effects(answer["effects"]) if "effects" in answer else {}
        completion = check_completion(answer.get("completion"))
        buffer_effects(context, effects)
    except EffectsInvalid as error:
        return FunctionOutcome(OutcomeStatus.FAILED, f"output-schema-invalid: {error}")
    outcome = FunctionOutcome(OutcomeStatus.SUCCESS, output={}, writes=context.plugin_data.writes, read_from=set(context.plugin_data.read_from),
                              events=list(context.emitted), shown=shown_effects(effects), completion=completion)
    if answer["kind"] != "none":
        # No value (spec: 没有值时投影为空对象); a handler gives JSON null by returning NULL.
        result = answer.get("v") if answer["kind"] == "value" else None
        outcome.output, outcome.canonical_value, outcome.has_value = project_value(result), json_copy(result), True
    return outcome


def suspended_outcome(context: FunctionContext, asked: Any) -> FunctionOutcome:
    """Suspend(interaction): the runtime waits for the player; its writes and events so far are held."""
    try:
        shown = suspended_outcome_parts(asked)
    except EffectsInvalid as error:
        return FunctionOutcome(OutcomeStatus.FAILED, f"output-schema-invalid: {error}")
    return FunctionOutcome(OutcomeStatus.SUSPENDED, "waiting for the player's answer", read_from=set(context.plugin_data.read_from), shown=shown,
                           suspension={"writes": context.plugin_data.writes, "events": list(context.emitted)})

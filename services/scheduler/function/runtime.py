"""Run a function runtime: import its `handler.py`, call `handler(ctx)`, shape its value.

A handler is plugin code: whatever it raises or however long it hangs, the runtime fails
(with the reason) and nothing of it commits; the kernel goes on.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import inspect
import os
import random
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from shared.logs import get_logger
from shared.plugin_code import PluginFile, load_callable
from shared.plugin_data.execution_view import BufferedWrite, ExecutionView
from shared.plugin_data.operations import DELETED, MISSING, apply_operations
from shared.plugin_sdk import CancellationSignal, json_copy
from shared.plugin_sdk.values import NULL
from shared.plugin_threads import in_plugin_thread
from shared.sandbox.function_context import FUNCTION_PROPOSAL_TYPES

log = get_logger(component="function_runtime")


class SeededRandom:
    """ctx.random: `int(min, max)` gives min <= n < max (like node's randomInt, as the spec says);
    seeded by COVEL_RANDOM_SEED so a run repeats. A d6 is `int(1, 7)`."""

    def __init__(self, seed_material: str) -> None:
        self._seeded(hashlib.sha256(seed_material.encode()).digest())

    def _seeded(self, seed: bytes) -> None:
        self._seed = seed
        self._rng = random.Random(seed)
        self._drawn = False

    def int(self, minimum: int, maximum: int) -> int:
        check_random_range(minimum, maximum)
        self._drawn = True
        return self._rng.randrange(minimum, maximum)

    def float(self) -> float:
        self._drawn = True
        return self._rng.random()

    def snapshot(self) -> dict[str, Any]:
        """What rebuilds this generator, as JSON (a sandbox worker's ctx.random): its seed while nothing
        was drawn (the 625-word state cost each handler call ~0.3 ms to copy, encode and decode), else its state."""
        if not self._drawn:
            return {"seed": self._seed.hex()}
        version, internal, gauss = self._rng.getstate()
        return {"state": [version, list(internal), gauss]}

    @classmethod
    def restore(cls, snapshot: dict[str, Any]) -> SeededRandom:
        """The generator `snapshot` describes: the same rolls from here on as the original's."""
        rebuilt = cls.__new__(cls)
        if "seed" in snapshot:
            rebuilt._seeded(bytes.fromhex(str(snapshot["seed"])))
        else:
            rebuilt._seeded(b"")
            version, internal, gauss = snapshot["state"]
            rebuilt._rng.setstate((int(version), tuple(int(n) for n in internal), gauss))
            rebuilt._drawn = True
        return rebuilt


SAFE_INTEGER = 2**53 - 1


def check_random_range(minimum: Any, maximum: Any) -> None:
    """The SDK's validateRandomIntRange: safe integers, min < max, a width below 2**48."""
    for name, value in (("min", minimum), ("max", maximum)):
        if not isinstance(value, int) or isinstance(value, bool) or abs(value) > SAFE_INTEGER:
            raise ValueError(f"random.int({minimum!r}, {maximum!r}): {name} must be a safe integer")
    if minimum >= maximum:
        raise ValueError(f"random.int({minimum}, {maximum}): min must be below max (max is not included)")
    if maximum - minimum >= 2**48:
        raise ValueError(f"random.int({minimum}, {maximum}): the range must be narrower than 2**48")


def seeded_random(logical_turn: int, runtime_id: str, session_id: str) -> SeededRandom:
    seed = os.environ.get("COVEL_RANDOM_SEED")
    material = f"{seed}:{logical_turn}:{runtime_id}" if seed else f"{os.urandom(16).hex()}:{session_id}:{runtime_id}"
    return SeededRandom(material)


LoadNamespace = Callable[[str | None], Awaitable[dict[tuple[str, str], Any]]]


@dataclass
class PluginDataView:
    """ctx.plugin_data, with the spec's in-execution visibility.

    Reads see the committed value, then the buffered writes of this plugin's completed upstream
    runtimes in commit order, then this runtime's own writes (shared/plugin_data). Each read
    records which upstream runtimes it now depends on; writes become proposals of this runtime.
    """

    plugin_id: str
    load_committed: LoadNamespace
    upstream: list[BufferedWrite] = field(default_factory=list)
    own: list[BufferedWrite] = field(default_factory=list)
    read_from: set[str] = field(default_factory=set)
    _committed: dict[tuple[str, str], Any] = field(default_factory=dict)
    _loaded: set[str | None] = field(default_factory=set)

    async def _view(self, namespace: str | None) -> ExecutionView:
        if namespace not in self._loaded and None not in self._loaded:
            self._committed.update(await self.load_committed(namespace))
            self._loaded.add(namespace)
        return ExecutionView(self._committed, self.upstream, self.own)

    async def get(self, namespace: str, key: str, default: Any = None) -> Any:
        value, depends = (await self._view(namespace)).get(namespace, key)
        self.read_from |= depends
        return default if value is MISSING else json_copy(value)

    async def list(self, namespace: str | None = None) -> dict[str, Any]:
        """{key: value} of one namespace, or {"namespace/key": value} of all this plugin's data."""
        entries, depends = (await self._view(namespace)).list(namespace)
        self.read_from |= depends
        if namespace is not None:
            return {key: json_copy(value) for (_, key), value in entries.items()}
        return {f"{ns}/{key}": json_copy(value) for (ns, key), value in entries.items()}

    def _write(self, kind: str, payload: dict[str, Any]) -> None:
        namespace, key = payload.get("namespace"), payload.get("key")
        if not isinstance(namespace, str) or not namespace or not isinstance(key, str) or not key:
            raise ValueError("plugin_data: namespace and key are non-empty strings")
        self.own.append(BufferedWrite(self.plugin_id, kind, json_copy(payload)))

    async def set(self, namespace: str, key: str, value: Any) -> None:
        self._write("plugin.data", {"namespace": namespace, "key": key, "value": value})

    async def delete(self, namespace: str, key: str) -> None:
        self._write("plugin.data.delete", {"namespace": namespace, "key": key})

    async def update(self, namespace: str, key: str, operations: Sequence[dict[str, Any]]) -> Any:
        """Apply operations (set, merge, inc, append, insert, remove, upsertItem, delete); returns the new value."""
        current = await self.get(namespace, key, MISSING)
        value = apply_operations(current, list(operations))  # raises OperationError early, like the commit would
        self._write("plugin.data.update", {"namespace": namespace, "key": key, "operations": list(operations)})
        return None if value in (MISSING, DELETED) else json_copy(value)

    @property
    def writes(self) -> builtins.list[dict[str, Any]]:  # builtins: `list` here is the method above
        return [{"type": write.type, "payload": dict(write.payload)} for write in self.own]


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
    # await ctx.services.call(contract, args): another plugin's service (covel.register_service).
    services: Any = None
    # await ctx.progress.report(job_id, label, done=, total=) / finish(job_id, status): progress.py.
    progress: Any = None
    # ctx.session: {lastPlayerInput} (a PlayerInputSubmission or None), frozen when the execution started.
    session: Any = None

    def propose(self, type: str, payload: Any) -> None:
        """A world or data proposal of this runtime (character.upsert, character.schema.set,
        dimension.initialize/update, plugin.data*), committed with the runtime's unit and checked there."""
        if type not in FUNCTION_PROPOSAL_TYPES:
            raise ValueError(f"propose({type!r}): a function may propose {', '.join(FUNCTION_PROPOSAL_TYPES)}")
        if not isinstance(payload, dict):
            raise ValueError(f"propose({type!r}): the payload is an object")
        self.plugin_data.own.append(BufferedWrite(self.runtime_id, type, json_copy(payload)))

    def emit_event(self, topic: str, payload: Any = None) -> None:
        if not isinstance(topic, str) or not re.match(r"^[A-Za-z0-9._:/-]{1,120}$", topic):
            raise ValueError(f"emit_event({topic!r}): a topic is letters, digits and . _ : / -")
        self.emitted.append({"topic": topic, "payload": json_copy(payload)})




@dataclass
class FunctionOutcome:
    status: str
    reason: str = ""
    output: dict[str, Any] = field(default_factory=dict)
    canonical_value: Any = None
    has_value: bool = False
    writes: list[dict[str, Any]] = field(default_factory=list)
    read_from: set[str] = field(default_factory=set)
    events: list = field(default_factory=list)
    duration_ms: int = 0


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
        return finished(FunctionOutcome("failed", f"function.timeoutMs: the handler did not finish within {limit_ms} ms"))
    except Exception as error:
        log.warning("function.failed", runtime_id=context.runtime_id, error=repr(error), exc_info=True)
        return finished(FunctionOutcome("failed", f"handler raised {type(error).__name__}: {error}"))
    if result is None:
        # No value (spec: 没有值时投影为空对象); a handler gives JSON null by returning NULL.
        return finished(FunctionOutcome("success", output={}, writes=context.plugin_data.writes,
                                        read_from=set(context.plugin_data.read_from), events=list(context.emitted)))
    if result is NULL:
        result = None
    return finished(
        FunctionOutcome(
            "success", output=project_value(result), canonical_value=json_copy(result), has_value=True,
            writes=context.plugin_data.writes, read_from=set(context.plugin_data.read_from), events=list(context.emitted),
        )
    )

"""What a hookspec adapter keeps of calls between a Pre… event and its Post… (hookspec_adapter.py):
the pending model and tool calls, the keys they are kept under, and the values a hook sees of them.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from services.hooks.common.markers import MISSING, CallContext
from shared.plugin_sdk import HookContext
from shared.plugin_sdk.hookspecs import LLMCallRequest, ToolCall

REPLACED_PREFIX = "covel:replaced:"
# Calls seen by a Pre* hook and not yet by its Post* (a failed model call never reaches PostLLMResponse).
PENDING_LIMIT = 4096


class LLMCallFailed(Exception):
    """after_llm_call's error for a call that got no answer to PostLLMResponse."""


@dataclass
class PendingLLMCall:
    request: LLMCallRequest
    started_ns: int
    # What this plugin left the messages as: PostLLMResponse carries the messages sent.
    sent: str
    finish: str | None = None


@dataclass
class PendingToolCall:
    call: ToolCall
    started_ns: int
    replacement: Any = MISSING
    # CallTool answered with the replacement (the call then counts as a successful one).
    answered: bool = False


class Pending:
    """Calls a Pre* event saw and its Post* has not: a list per key (several executions of one
    runtime may be in flight at once), oldest keys dropped past PENDING_LIMIT entries."""

    def __init__(self) -> None:
        self._by_key: OrderedDict[Any, list[Any]] = OrderedDict()
        self._count = 0

    def put(self, key: Any, value: Any) -> None:
        self._by_key.setdefault(key, []).append(value)
        self._count += 1
        while self._count > PENDING_LIMIT:
            _, dropped = self._by_key.popitem(last=False)
            self._count -= len(dropped)

    def take(self, key: Any, prefer: Callable[[Any], bool] = lambda entry: True, *, newest: bool = False) -> Any:
        """The first entry `prefer` accepts, else the oldest; with `newest`, the newest; None when there is none."""
        entries = self._by_key.get(key)
        if not entries:
            return None
        index = len(entries) - 1 if newest else next((i for i, entry in enumerate(entries) if prefer(entry)), 0)
        entry = entries.pop(index)
        self._count -= 1
        if not entries:
            del self._by_key[key]
        return entry

    def find(self, key: Any, prefer: Callable[[Any], bool]) -> Any:
        return next((entry for entry in self._by_key.get(key, ()) if prefer(entry)), None)

    def take_all(self, key: Any) -> list[Any]:
        entries = self._by_key.pop(key, [])
        self._count -= len(entries)
        return entries

    def take_where(self, wanted: Callable[[Any], bool]) -> list[tuple[Any, list[Any]]]:
        """(key, entries) of every key `wanted` accepts, removed."""
        found = [(key, self._by_key.pop(key)) for key in [key for key in self._by_key if wanted(key)]]
        self._count -= sum(len(entries) for _, entries in found)
        return found

    def __len__(self) -> int:
        return self._count


def run_id_of(ctx: CallContext) -> str:
    """LLMCallRequest.run_id and friends: "<turn id>:<runtime id>"."""
    return f"{ctx.turn_id}:{ctx.runtime_id}"


def execution_key(ctx: CallContext) -> tuple[str, str, str, str]:
    """Where an execution's pending calls are kept: (turn, root execution, runtime, execution).
    Without an execution id in the context, one key per runtime in the turn (matched by content)."""
    execution_id = getattr(ctx, "execution_id", None) or ""
    root = (getattr(ctx, "root_execution_id", None) or execution_id) if execution_id else ""
    return (ctx.turn_id, root, ctx.runtime_id or "", execution_id)


def hook_state(ctx: HookContext, loaded: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**(loaded or {}),
        "session_id": ctx.session_id, "turn_id": ctx.turn_id, "locale": ctx.locale,
        "plugin_id": ctx.plugin_id, "runtime_id": ctx.runtime_id,
        "execution_id": getattr(ctx, "execution_id", None) or "",
        "subagent_call_id": getattr(ctx, "subagent_call_id", None) or "",
        "parent_runtime_id": getattr(ctx, "parent_runtime_id", None) or "", "ctx": ctx,
        # provide_environment's answer for this session (environments.py); empty without.
        "environment": dict(getattr(ctx, "environment", None) or {}), "workspace": getattr(ctx, "workspace", None),
    }


def tool_arguments(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def digest(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def elapsed_ms(started_ns: int | None) -> int:
    return (time.perf_counter_ns() - started_ns) // 1_000_000 if started_ns else 0

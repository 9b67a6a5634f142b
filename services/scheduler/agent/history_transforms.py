"""prompt.history-transform@1: plugins rewrite the conversation history an agent sends.

A story runtime's history goes through every active provider, another runtime's through its own
package's (as with prompt.segment@1). Providers run one after another, each on what the one before
it answered: by `order` (contributes.extensions), then plugin id, then provider id. A provider is
`transform(ctx, request)` with request `{runtimeId, visibility, locale, messages, data}`:
`messages` are the log's player and story entries after the latest summary, in order,
`{id, seq, role: player | story, text, turnId}`; `data` is the provider plugin's own data as the
execution sees it (prompt_segments.py). It answers `{messages: [...]}` (or the list itself): the
history in its new order. An entry that keeps an `id` is that entry with its `text` (the role stays
the original's); an entry without one is a new `{role, text}`; an entry left out is dropped. None
leaves the history as it is. A provider that fails or answers something else is skipped with a log
line, and the next one gets the history as it was: an agent never fails because of a transform.
The stored log never changes: only what this execution sends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from covel.common.v1 import common_pb2
from services.scheduler.catalogue import Package, Runtime
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from shared.logs import get_logger
from shared.structs import from_struct, from_value

POINT = "prompt.history-transform@1"
ROLES = ("player", "story")
TIMEOUT_MS = 5000
log = get_logger(component="history_transforms")


class TransformRefused(ValueError):
    """A provider's answer that is not a history (the provider is skipped)."""


def providers(runtime: Runtime, story: bool, packages: Iterable[Package]) -> list[tuple[str, str]]:
    """(plugin id, provider id) in the order they run."""
    found: list[tuple[int, str, str]] = []
    for package in packages:
        if not (story or package.id == runtime.plugin_id) or package.definition is None:
            continue
        found += [(entry.order, package.id, entry.id) for entry in package.definition.contributes.extensions or [] if entry.point == POINT]
    return [(plugin_id, provider) for _, plugin_id, provider in sorted(found)]


def live_part(history: list[common_pb2.Message]) -> tuple[list[common_pb2.Message], list[common_pb2.Message]]:
    """(what stays as it is, the player and story entries after the latest summary)."""
    summary = next((m for m in reversed(history) if m.role == "summary"), None)
    through = int(from_struct(summary.metadata).get("throughSeq", 0)) if summary is not None else 0
    live = [m for m in history if m.role in ROLES and m.seq > through]
    chosen = {id(m) for m in live}
    return [m for m in history if id(m) not in chosen], live


def as_entries(messages: list[common_pb2.Message]) -> list[dict[str, Any]]:
    return [{"id": m.id, "seq": m.seq, "role": m.role, "text": m.text, "turnId": m.turn_id} for m in messages]


def apply_answer(live: list[common_pb2.Message], output: Any) -> list[common_pb2.Message]:
    """The live entries as the provider answered them; TransformRefused for an answer that is not a history."""
    items = output.get("messages") if isinstance(output, dict) else output
    if not isinstance(items, list):
        raise TransformRefused("expected {messages: [...]} or a list of messages")
    originals = {m.id: m for m in live}
    result: list[common_pb2.Message] = []
    seq = live[0].seq if live else 1
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise TransformRefused(f"messages[{index}] is not {{id?, role, text}}")
        original = originals.get(str(item.get("id") or ""))
        if original is not None:
            message = common_pb2.Message()
            message.CopyFrom(original)
            message.text = item["text"]
        elif item.get("role") in ROLES:
            message = common_pb2.Message(role=item["role"], text=item["text"], session_id=live[0].session_id if live else "")
            message.seq = seq
        else:
            raise TransformRefused(f"messages[{index}]: a new message needs role player or story")
        seq = message.seq
        result.append(message)
    return result


async def transform_history(*, hooks: HookBus, committed: Callable[[str], Awaitable[dict]], scope: ExecutionScope, runtime: Runtime,
                            story: bool, packages: Iterable[Package], history: list[common_pb2.Message]) -> list[common_pb2.Message]:
    """The history this execution sends: every provider's transform in turn (`committed` as in prompt_segments)."""
    chain = providers(runtime, story, packages)
    if not chain:
        return history
    kept, live = live_part(history)
    for plugin_id, provider in chain:
        data: dict[str, dict[str, Any]] = {}
        for (namespace, key), value in (await committed(plugin_id)).items():
            if not namespace.startswith("_"):
                data.setdefault(namespace, {})[key] = value
        request = {"runtimeId": runtime.runtime_id, "visibility": runtime.visibility, "locale": scope.session.locale,
                   "messages": as_entries(live), "data": data}
        answers = await hooks.call_extension(scope, POINT, request, plugin_id=plugin_id, timeout_ms=TIMEOUT_MS)
        answer = next((a for a in answers if a.id == provider), None)
        if answer is None:
            log.warning("history_transform.missing", provider=f"{plugin_id}/{provider}", why="not registered")
            continue
        if not answer.ok:
            log.warning("history_transform.failed", provider=f"{plugin_id}/{provider}", reason=answer.error)
            continue
        output = from_value(answer.output)
        if output is None:
            continue
        try:
            live = apply_answer(live, output)
        except TransformRefused as error:
            log.warning("history_transform.ignored", provider=f"{plugin_id}/{provider}", why=str(error))
    return [*kept, *live]

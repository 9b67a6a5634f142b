"""prompt.segment@1: dynamic prompt segments that plugins compute per agent execution.

A story runtime reads every active provider's segments, another runtime its own package's
(as with static `contributes.prompt` segments) and those of the plugins whose services it
imports. A provider is `segment(ctx, request)` with request `{runtimeId, visibility, locale, playerMessage, data: {namespace: {key: value}}, services}` (the provider plugin's own data as the execution sees it: committed values, then what the plugin's runtimes
that finished before wrote this turn; `_` namespaces left out; `services`: the contracts the runtime
imports with agent.tools.services) and answers a segment
`{id, content, position?, role?}`, a list of them, or None. Position is system, pre-history,
post-history (default) or {depth: N}. A provider that fails is skipped with a log line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from covel.hooks.v1 import hooks_pb2
from services.scheduler.catalogue import Package, Runtime
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from shared.logs import get_logger
from shared.structs import from_value

POINT = "prompt.segment@1"
POSITIONS = ("system", "pre-history", "post-history")
MAX_SEGMENT_CHARS = 8000
log = get_logger(component="prompt_segments")


def providers(runtime: Runtime, story: bool, packages: Iterable[Package]) -> list[str]:
    """Every provider for a story runtime; else its own package's, and those of the packages whose
    services it imports (agent.tools.services: an agent that uses a plugin's services reads its segments)."""
    imported = imported_services(runtime)
    return sorted(p.id for p in packages if (story or p.id == runtime.plugin_id or _serves(p, imported))
                  and any(e.startswith(f"{POINT}/") for e in p.extensions))


def imported_services(runtime: Runtime) -> set[str]:
    manifest = getattr(runtime, "manifest", None)
    agent = getattr(manifest, "agent", None) if manifest is not None else None
    return {item.contract for item in agent.tools.services} if agent is not None else set()


def _serves(package: Package, contracts: set[str]) -> bool:
    definition = getattr(package, "definition", None)
    if not contracts or definition is None:
        return False
    return any(entry.contract in contracts for entry in definition.contributes.services or [])


async def dynamic_segments(*, hooks: HookBus, committed: Callable[[str], Awaitable[dict]], scope: ExecutionScope, runtime: Runtime,
                           story: bool, packages: Iterable[Package], player_message: str) -> list[dict[str, Any]]:
    """`committed(plugin_id)`: the plugin's data as the execution sees it, (namespace, key) -> value. The providers
    are asked at once (each plugin's input is its own data), their segments kept in the providers' order."""

    async def segments_of(plugin_id: str) -> list[dict[str, Any]]:
        data: dict[str, dict[str, Any]] = {}
        for (namespace, key), value in (await committed(plugin_id)).items():
            if not namespace.startswith("_"):
                data.setdefault(namespace, {})[key] = value
        request = {"runtimeId": runtime.runtime_id, "visibility": runtime.visibility, "locale": scope.session.locale,
                   "playerMessage": player_message, "data": data, "services": sorted(imported_services(runtime))}
        found: list[dict[str, Any]] = []
        for answer in await hooks.call_extension(scope, POINT, request, plugin_id=plugin_id, timeout_ms=5000):
            if not answer.ok:
                log.warning("prompt_segment.failed", provider=f"{answer.plugin_id}/{answer.id}", reason=answer.error)
                continue
            found += [segment for segment in (_segment(item, answer) for item in _items(from_value(answer.output))) if segment]
        return found

    answered = await asyncio.gather(*(segments_of(plugin_id) for plugin_id in providers(runtime, story, packages)))
    return [segment for segments in answered for segment in segments]


def _items(output: Any) -> list[Any]:
    if output is None:
        return []
    return output if isinstance(output, list) else [output]


def _segment(item: Any, answer: hooks_pb2.ExtensionAnswer) -> dict[str, Any] | None:
    if not isinstance(item, dict) or not isinstance(item.get("content"), str) or not item["content"].strip():
        log.warning("prompt_segment.ignored", provider=f"{answer.plugin_id}/{answer.id}", why="no content")
        return None
    position = item.get("position", "post-history")
    if not (position in POSITIONS or (isinstance(position, dict) and isinstance(position.get("depth"), int))):
        position = "post-history"
    segment = {"id": str(item.get("id") or answer.id), "content": item["content"][:MAX_SEGMENT_CHARS], "position": position,
               "pluginId": answer.plugin_id}
    if item.get("role") in ("system", "user", "assistant"):
        segment["role"] = item["role"]
    return segment

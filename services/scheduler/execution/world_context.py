"""session.world-context@1: the session's world context, frozen once a turn when a runtime first binds it.

The kernel's part is host-verified (read from the store with the turn's lease, never from a plugin): the world
id, the dimensions' values and versions, and the open dimension settlement receipts (what a maintainer retry
or an editor needs to recover). Plugins that `provide_extension("session.world-context@1", id, provider)` add
their own part: `provider(ctx, request)` gets `{locale, worldId, dimensions, pendingSettlements}` and answers a
JSON object, kept under `context.<pluginId>`. A provider that fails or answers something else is left out
with a log line. Nothing is asked when no runtime of the turn binds the input.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterable
from typing import Any

from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Package
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.world_records import dimension_records
from shared.logs import get_logger
from shared.structs import from_value

POINT = "session.world-context@1"
# One provider's part, as JSON.
MAX_PART_CHARS = 16_000
log = get_logger(component="world_context")


def settlement_view(receipt: store_pb2.DimensionSettlement) -> dict[str, Any]:
    """A receipt as runtimes and clients see it (its input snapshot stays with the kernel)."""
    view: dict[str, Any] = {"sourceTurnId": receipt.source_turn_id, "sourceLogicalTurn": receipt.source_logical_turn,
                            "pluginId": receipt.plugin_id, "runtimeId": receipt.runtime_id, "status": receipt.status,
                            "attempts": receipt.attempts}
    if receipt.last_error:
        view["lastError"] = receipt.last_error
    return view


def kernel_part(session: store_pb2.Session | None, world: store_pb2.GetWorldResponse | None) -> dict[str, Any]:
    dimensions = {key: {"value": record["value"], "version": record["version"]} for key, record in dimension_records(world).items()}
    pending = [settlement_view(receipt) for receipt in (world.pending_settlements if world is not None else [])]
    return {"worldId": session.world_id if session is not None else "", "locale": session.locale if session is not None else "",
            "dimensions": dimensions, "pendingSettlements": pending}


def providers(packages: Iterable[Package]) -> list[str]:
    return sorted(p.id for p in packages if any(e.startswith(f"{POINT}/") for e in p.extensions))


async def world_context(hooks: HookBus, scope: ExecutionScope, session: store_pb2.Session | None, world: store_pb2.GetWorldResponse | None,
                        packages: Iterable[Package]) -> dict[str, Any]:
    """The kernel's part and each active provider's, as the turn found them (the providers asked at once, each
    with its own copy of the kernel's part; the parts in the providers' order)."""
    snapshot = kernel_part(session, world)
    ids = providers(packages)
    replies = await asyncio.gather(*(hooks.call_extension(scope, POINT, copy.deepcopy(snapshot), plugin_id=plugin_id, timeout_ms=5000)
                                     for plugin_id in ids))
    parts: dict[str, Any] = {}
    for answers in replies:
        for answer in answers:
            part = from_value(answer.output) if answer.ok else None
            problem = answer.error if not answer.ok else _part_problem(part)
            if problem:
                log.warning("world_context.ignored", provider=f"{answer.plugin_id}/{answer.id}", why=problem)
                continue
            parts[answer.plugin_id] = part
    return {**snapshot, "context": parts}


def _part_problem(part: Any) -> str:
    if not isinstance(part, dict):
        return "the answer is not a JSON object"
    if len(json.dumps(part, ensure_ascii=False, default=str)) > MAX_PART_CHARS:
        return f"the answer is over {MAX_PART_CHARS} characters of JSON"
    return ""

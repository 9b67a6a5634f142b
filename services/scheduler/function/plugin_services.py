"""Services other plugins registered (covel.register_service), as an agent's imported tools
(agent.tools.services) and as a function's `ctx.services.call(contract, args)`.

A read service only answers; a write service's staged proposals commit with the calling run,
attributed to the service's plugin, and only if that run succeeds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from services.scheduler.agent.tools import KernelTools
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from shared.plugin_sdk.tools import tool_error
from shared.structs import from_struct


def service_declarations(packages: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """contract -> (provider plugin id, its contributes.services entry) over the session's plugins."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for plugin_id, package in sorted(packages.items()):
        declared = (from_struct(package.definition).get("contributes") or {}).get("services") or []
        for entry in declared:
            entry = entry if isinstance(entry, dict) else {"contract": entry}
            if isinstance(entry.get("contract"), str):
                found.setdefault(entry["contract"], (plugin_id, entry))
    return found


def tool_name(contract: str) -> str:
    """notes.search@1 -> notes-search: what the model calls an imported service without `as`."""
    return re.sub(r"[^a-z0-9_-]+", "-", contract.split("@", 1)[0].lower()).strip("-")[:64]


def add_service_tools(tools: KernelTools, manifest: dict[str, Any], packages: Mapping[str, Any], hooks: HookBus,
                      scope: ExecutionScope, runtime) -> None:
    """agent.tools.services: each model-facing service with an active provider becomes a tool; an
    import without a provider is left out and the runtime runs as usual (spec)."""
    imports = (((manifest.get("agent") or {}).get("tools") or {}).get("services")) or []
    declared = service_declarations(packages)
    for item in imports:
        item = item if isinstance(item, dict) else {"contract": item}
        contract = item.get("contract")
        if not isinstance(contract, str) or contract not in declared:
            continue
        provider, declaration = declared[contract]
        if not declaration.get("modelFacing"):
            continue
        name = str(item.get("as") or tool_name(contract))
        writes = declaration.get("access") == "write"

        async def call(args: dict[str, Any], contract: str = contract, provider: str = provider) -> dict[str, Any]:
            reply = await hooks.call_service(scope, runtime.plugin_id, runtime.runtime_id, contract, json.dumps(args))
            if reply.ok:
                tools.foreign_writes.extend(
                    {"pluginId": provider, "type": p.type, "payload": from_struct(p.payload)} for p in reply.proposals)
            return json.loads(reply.result)

        description = str(declaration.get("description") or f"The {contract} service of {provider}.")
        # A subagent keeps imported write services too: it calls them as itself and the staged
        # operations go with the delegating run (spec: 子 agent).
        tools.add(name, description, {"type": "object"}, call, read_only=not writes, subagent_keeps=True)


class ServicesView:
    """ctx.services.call(contract, args) in function runtimes."""

    def __init__(self, hooks: HookBus, scope: ExecutionScope, runtime, packages: Mapping[str, Any]) -> None:
        self._hooks = hooks
        self._scope = scope
        self._runtime = runtime
        self._declared = service_declarations(packages)
        # Proposals of write services, attributed to their plugins: {pluginId, type, payload}.
        self.writes: list[dict[str, Any]] = []

    async def call(self, contract: str, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        if contract not in self._declared:
            return tool_error("not-found", f"no active plugin of this session declares the service {contract}")
        provider = self._declared[contract][0]
        reply = await self._hooks.call_service(self._scope, self._runtime.plugin_id, self._runtime.runtime_id, contract,
                                               json.dumps(dict(args or {}), ensure_ascii=False))
        if reply.ok:
            self.writes.extend({"pluginId": provider, "type": p.type, "payload": from_struct(p.payload)} for p in reply.proposals)
        return json.loads(reply.result)

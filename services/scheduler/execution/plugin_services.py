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

from services.scheduler.catalogue import Package, Runtime
from services.scheduler.execution.kernel_tools import KernelTools
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from shared.manifest import CompiledManifest
from shared.manifest.package import ServiceEntry
from shared.plugin_sdk.tools import tool_error
from shared.structs import from_struct


def service_declarations(packages: Mapping[str, Package]) -> dict[str, tuple[str, ServiceEntry]]:
    """contract -> (provider plugin id, its contributes.services entry) over the session's plugins."""
    found: dict[str, tuple[str, ServiceEntry]] = {}
    for plugin_id, package in sorted(packages.items()):
        for entry in package.contributes.services or []:
            found.setdefault(entry.contract, (plugin_id, entry))
    return found


def tool_name(contract: str) -> str:
    """notes.search@1 -> notes-search: what the model calls an imported service without `as`."""
    return re.sub(r"[^a-z0-9_-]+", "-", contract.split("@", 1)[0].lower()).strip("-")[:64]


def add_service_tools(tools: KernelTools, manifest: CompiledManifest, packages: Mapping[str, Package], hooks: HookBus,
                      scope: ExecutionScope, runtime: Runtime) -> None:
    """agent.tools.services: each model-facing service with an active provider becomes a tool; an
    import without a provider is left out and the runtime runs as usual (spec)."""
    declared = service_declarations(packages)
    for item in manifest.agent_part.tools.services:
        contract = item.contract
        if contract not in declared:
            continue
        provider, declaration = declared[contract]
        if not declaration.model_facing:
            continue
        name = item.as_ or tool_name(contract)
        writes = declaration.access == "write"

        async def call(args: dict[str, Any], contract: str = contract, provider: str = provider) -> dict[str, Any]:
            if tools.plugin_data is None:
                reply = await hooks.call_service(scope, runtime.plugin_id, runtime.runtime_id, contract, json.dumps(args))
            else:
                reply = await hooks.call_service(scope, runtime.plugin_id, runtime.runtime_id, contract, json.dumps(args),
                                                 plugin_data=await tools.plugin_data(provider))
            if reply.ok:
                tools.foreign_writes.extend(staged_writes(provider, contract, reply.proposals))
            return json.loads(reply.result)

        description = f"The {contract} service of {provider}."
        # A subagent keeps imported write services too: it calls them as itself and the staged
        # operations go with the delegating run (spec: 子 agent).
        tools.add(name, description, {"type": "object"}, call, read_only=not writes, subagent_keeps=True)


def staged_writes(provider: str, contract: str, proposals: Any) -> list[dict[str, Any]]:
    """A write service's staged changes: {pluginId: its provider, service: its contract, type, payload}. They reach
    PreStateCommit from the provider, as runtime `service:<contract>` (the caller is not named), and commit with the
    calling unit."""
    return [{"pluginId": provider, "service": contract, "type": p.type, "payload": from_struct(p.payload)} for p in proposals]


class ServicesView:
    """ctx.services.call(contract, args) in function runtimes."""

    def __init__(self, hooks: HookBus, scope: ExecutionScope, runtime: Runtime, packages: Mapping[str, Package]) -> None:
        self._hooks = hooks
        self._scope = scope
        self._runtime = runtime
        self._packages = packages
        self._found: dict[str, tuple[str, ServiceEntry]] | None = None
        # Proposals of write services, attributed to their plugins: {pluginId, type, payload}.
        self.writes: list[dict[str, Any]] = []

    @property
    def _declared(self) -> dict[str, tuple[str, ServiceEntry]]:
        """Found at the first call: most handlers given ctx.services never call one."""
        if self._found is None:
            self._found = service_declarations(self._packages)
        return self._found

    async def call(self, contract: str, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        if contract not in self._declared:
            return tool_error("not-found", f"no active plugin of this session declares the service {contract}")
        provider = self._declared[contract][0]
        reply = await self._hooks.call_service(self._scope, self._runtime.plugin_id, self._runtime.runtime_id, contract,
                                               json.dumps(dict(args or {}), ensure_ascii=False))
        if reply.ok:
            self.writes.extend(staged_writes(provider, contract, reply.proposals))
        return json.loads(reply.result)

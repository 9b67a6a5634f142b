"""The fuzz suite's fixtures: the five services as real processes, and strings they know."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest_asyncio

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import scheduler_pb2_grpc
from covel_cli.launcher import SERVICES, ServiceGroup
from shared.grpc_client import open_channel
from shared.hook_events import HOOK_EVENTS
from shared.security.policy import CLIENT, rule_of
from tests.e2e.conftest import minimal_session, running_services
from tests.support.identities import CALLER_PREFERENCE

# Values a legitimate caller sends, mixed into generated strings so requests get past the first lookup.
PROTOCOL_WORDS = (
    "agent", "function", "player", "manual", "background", "continuation", "story", "system", "pre", "normal",
    "post", "setup", "pre-turn", "narrative", "post-turn", "audit", "default", "fast",
)


def caller_of(path: str) -> str:
    """Who calls `/package.Service/Method` in a running deployment (shared/security/policy.py): a public client, or a service / the operator."""
    rule = rule_of(path)
    if rule is None:
        raise LookupError(f"{path} is in no row of shared/security/policy.py: nobody may call it")
    return CLIENT if CLIENT in rule.callers else next(caller for caller in CALLER_PREFERENCE if caller in rule.callers)


@dataclass
class FuzzTarget:
    group: ServiceGroup
    pools: tuple[tuple[str, tuple[str, ...]], ...] = ()
    _channels: dict[tuple[str, str], grpc.aio.Channel] = field(default_factory=dict)

    def channel(self, service: str, path: str) -> grpc.aio.Channel:
        """A channel to `service` as the legitimate caller of `path` (its certificate; a public client for the scheduler)."""
        caller = caller_of(path)
        if (service, caller) not in self._channels:
            security = self.group.security(service) if caller == CLIENT else self.group.security_as(caller)
            self._channels[service, caller] = open_channel(self.group.addrs[service], security=security)
        return self._channels[service, caller]

    def stub(self, service: str, stub_class: type, method: str) -> Any:
        full_name = stub_class.__name__.removesuffix("Stub")
        return getattr(stub_class(self.channel(service, f"/{SERVICE_NAMES[service]}.{full_name}/{method}")), method)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()


# Proto package of each service's API.
SERVICE_NAMES = {name: f"covel.{name}.v1" for name in SERVICES}


async def _known_pools(target: FuzzTarget) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Pools of ids and names the running services know (proto_strategies.FIELD_POOLS says which field takes which)."""
    create = target.stub("scheduler", scheduler_pb2_grpc.SchedulerStub, "CreateSession")
    pools: dict[str, set[str]] = {"sessions": {(await create(minimal_session(title=f"fuzz {n}"))).session.id for n in range(2)}}
    catalogue = await target.stub("registry", registry_pb2_grpc.PluginRegistryStub, "ListPlugins")(registry_pb2.ListPluginsRequest())
    for plugin in catalogue.plugins:
        pools.setdefault("plugins", set()).add(plugin.id)
        pools.setdefault("tools", set()).update(plugin.tools, plugin.actions)
        pools.setdefault("contracts", set()).update(plugin.provides, plugin.services)
        pools.setdefault("runtimes", set()).update(runtime.runtime_id for runtime in plugin.runtimes)
        pools.setdefault("points", set()).update(extension.rsplit("/", 1)[0] for extension in plugin.extensions)
    tools = await target.stub("hooks", hooks_pb2_grpc.HookDispatcherStub, "ListTools")(hooks_pb2.ListToolsRequest())
    pools["tools"].update(tool.name for tool in tools.tools)
    keys = await target.stub("hooks", hooks_pb2_grpc.HookDispatcherStub, "ListEventKeys")(hooks_pb2.ListEventKeysRequest())
    pools["event_keys"] = {key.key for key in keys.keys}
    slots = await target.stub("gateway", gateway_pb2_grpc.LlmGatewayStub, "ListSlots")(gateway_pb2.ListSlotsRequest())
    pools["slots"] = {slot.slot for slot in slots.slots}
    pools["events"] = {event.name for event in HOOK_EVENTS}
    pools.update(action_kinds={"say", "do"}, locales={"en", "zh"}, sources={"player"}, words=set(PROTOCOL_WORDS))
    return tuple((name, tuple(sorted(values))) for name, values in sorted(pools.items()))


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fuzz_target(tmp_path_factory) -> AsyncIterator[FuzzTarget]:
    """The five services with the builtin plugins and an empty community folder (InstallPackage writes there)."""
    community = tmp_path_factory.mktemp("fuzz-community")
    async with running_services(tmp_path_factory.mktemp("fuzz-data"), plugin_dirs=(community,)) as group:
        target = FuzzTarget(group)
        try:
            target.pools = await _known_pools(target)
            yield target
        finally:
            await target.close()

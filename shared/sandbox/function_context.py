"""A function handler's (or guard's) ctx inside a sandbox worker: the same attributes and methods
as the scheduler's FunctionContext (services/scheduler/function/runtime.py), rebuilt from the plain
data the host sends. Values are copies; whatever needs the kernel (plugin data, the session, tools,
services, the gateway, subagents, progress, nested runs) is a call back to the host, which runs it
with the checks it always had. ctx.propose and ctx.emit_event are checked here and sent in order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import msgspec

from shared.plugin_code import PluginFile, load_callable, loaded_callable
from shared.plugin_sdk import freeze, json_copy
from shared.plugin_sdk.http_client import PluginHttpClient
from shared.plugin_sdk.plugin_log import PluginLog
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.plugin_sdk.values import result_message
from shared.plugin_sdk.world_preview import FrozenWorld as World
from shared.sandbox.operations import Operation

if TYPE_CHECKING:
    from shared.sandbox.worker_server import Call, WorkerServer

FUNCTION_PROPOSAL_TYPES = ("plugin.data", "plugin.data.batch", "plugin.data.delete", "plugin.data.update", "character.schema.set",
                           "character.upsert", "dimension.initialize", "dimension.update", "lorebook.upsert", "lorebook.delete")
TOPIC = re.compile(r"^[A-Za-z0-9._:/-]{1,120}$")


def check_proposal(type: str, payload: Any) -> None:
    if type not in FUNCTION_PROPOSAL_TYPES:
        raise ValueError(f"propose({type!r}): a function may propose {', '.join(FUNCTION_PROPOSAL_TYPES)}")
    if not isinstance(payload, dict):
        raise ValueError(f"propose({type!r}): the payload is an object")


def check_topic(topic: Any) -> None:
    if not isinstance(topic, str) or not TOPIC.match(topic):
        raise ValueError(f"emit_event({topic!r}): a topic is letters, digits and . _ : / -")


class _Remote:
    """A group of ctx capabilities that the host runs (`prefix.method`)."""

    def __init__(self, server: WorkerServer, call: Call, prefix: str) -> None:
        self._server, self._call, self._prefix = server, call, prefix

    async def _host(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self._server.host(self._call, f"{self._prefix}.{method}", *args, **kwargs)


class PluginData(_Remote):
    async def get(self, namespace: str, key: str, default: Any = None) -> Any:
        found = await self._host("get", namespace, key)
        return found["v"] if found["found"] else default

    async def list(self, namespace: str | None = None) -> dict[str, Any]:
        return await self._host("list", namespace)

    async def set(self, namespace: str, key: str, value: Any) -> None:
        await self._host("set", namespace, key, value)

    async def delete(self, namespace: str, key: str) -> None:
        await self._host("delete", namespace, key)

    async def update(self, namespace: str, key: str, operations: Sequence[dict[str, Any]]) -> Any:
        return await self._host("update", namespace, key, [dict(op) for op in operations])


class Store(_Remote):
    async def get_session(self) -> Mapping[str, Any]:
        return freeze(await self._host("get_session"))

    async def get_plugin_data(self, namespace: str, key: str, default: Any = None) -> Any:
        found = await self._server.host(self._call, "plugin_data.get", namespace, key)
        return found["v"] if found["found"] else default

    async def list_plugin_data(self, namespace: str | None = None) -> dict[str, Any]:
        return await self._server.host(self._call, "plugin_data.list", namespace)


class Tools(_Remote):
    async def call(self, name: str, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return await self._host("call", name, json_copy(dict(args or {})))


class Services(_Remote):
    async def call(self, contract: str, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return await self._host("call", contract, json_copy(dict(args or {})))


class Gateway(_Remote):
    def __init__(self, server: WorkerServer, call: Call, slot: str) -> None:
        super().__init__(server, call, "gateway")
        self.slot = slot

    async def generate_text(self, prompt: str | None = None, **options: Any) -> str:
        return await self._host("generate_text", prompt, **options)

    async def generate_object(self, prompt: str | None = None, **options: Any) -> Any:
        return await self._host("generate_object", prompt, **options)

    async def evaluate(self, prompt: str | None = None, **options: Any) -> Any:
        return await self._host("evaluate", prompt, **options)


class Agents(_Remote):
    def __init__(self, server: WorkerServer, call: Call, targets: list[str]) -> None:
        super().__init__(server, call, "agents")
        self._targets = list(targets)

    @property
    def available(self) -> bool:
        return bool(self._targets)

    def targets(self) -> list[str]:
        return list(self._targets)

    async def run(self, request: Any) -> dict[str, Any]:
        return await self._host("run", json_copy(request))


class Progress(_Remote):
    async def report(self, job_id: str, label: str = "", *, done: float = 0, total: float = 0, seq: int | None = None) -> None:
        await self._host("report", job_id, label, done=done, total=total, seq=seq)

    async def finish(self, job_id: str, status: str = "succeeded", label: str = "") -> None:
        await self._host("finish", job_id, status, label)


class SandboxFunctionContext:
    """ctx of a function handler or guard in the sandbox (see the module doc)."""

    def __init__(self, server: WorkerServer, call: Call, data: dict[str, Any]) -> None:
        self._server, self._call = server, call
        self.runtime_id: str = data["runtime_id"]
        self.plugin_id: str = data["plugin_id"]
        self.inputs = MappingProxyType(data.get("inputs") or {})
        self.player_message: str = data.get("player_message") or ""
        self.player_actions = tuple(data.get("player_actions") or ())
        self.logical_turn: int = data.get("logical_turn") or 0
        self.execution = MappingProxyType(data.get("execution") or {})
        self.recursion_depth: int = data.get("recursion_depth") or 0
        # The host's seeded generator, state and all: the same rolls as in the scheduler's own process.
        self.random = SeededRandom.restore(data["random"])
        self.signal = call.signal
        self.user_settings = MappingProxyType(data.get("user_settings") or {})
        self.activation = MappingProxyType(data.get("activation") or {})
        self.session = MappingProxyType(data.get("session") or {})
        self.messages = MappingProxyType(data.get("messages") or {})
        self.deadline: float = float(data.get("deadline") or 0)
        self.plugin_data = PluginData(server, call, "plugin_data")
        self.store = Store(server, call, "store")
        self.world = World(data["world"], lambda name: server.note(call, "world_read", name)) if data.get("world") is not None else None
        # Its requests go to the host, which checks them against the rules it holds (shared/sandbox/http_gate.py).
        self.http = PluginHttpClient(self.plugin_id, [(str(where), entry) for where, entry in data.get("http") or []])
        self.log = PluginLog(self.plugin_id)
        capabilities = set(data.get("capabilities") or ())
        self.tools = Tools(server, call, "tools") if "tools" in capabilities else None
        self.services = Services(server, call, "services") if "services" in capabilities else None
        self.gateway = Gateway(server, call, str(data.get("gateway_slot") or "plugin")) if "gateway" in capabilities else None
        self.agents = Agents(server, call, data.get("agent_targets") or []) if "agents" in capabilities else None
        self.progress = Progress(server, call, "progress") if "progress" in capabilities else None

    async def history_for(self, character_id: str, limit: int | None = None) -> Mapping[str, Any]:
        """CharacterHistory {characterId, entries: [{turnId, seq, text}], more}: the story the character witnessed."""
        return freeze(await self._server.host(self._call, "history_for", character_id, limit))

    async def recursive_call(self, runtime_id: str, input: dict | None = None, *, player_message: str | None = None) -> dict:
        return await self._server.host(self._call, "recursive_call", runtime_id, json_copy(input), player_message=player_message)

    def propose(self, type: str, payload: Any) -> None:
        check_proposal(type, payload)
        self._server.note(self._call, "propose", type, json_copy(payload))
        if self.world is not None:
            self.world.buffer(type, payload)

    def emit_event(self, topic: str, payload: Any = None) -> None:
        check_topic(topic)
        self._server.note(self._call, "emit_event", topic, json_copy(payload))


class FunctionArgs(msgspec.Struct, forbid_unknown_fields=True):
    """The `function` operation: the handler (or guard) file of the plugin at `root`, its entry, and its ctx."""

    root: str
    file: str
    ctx: dict[str, Any]
    entry: str = "handler"
    epoch: str | None = None


class FunctionReply(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """What the handler returned (shared/plugin_sdk/values.py result_message): `kind` none, null, value (`v`) or
    suspend (`interaction`), and its effects and completion."""

    kind: str
    v: Any = None
    effects: Any = None
    completion: Any = None
    interaction: Any = None


async def run_handler(server: WorkerServer, call: Call, args: FunctionArgs) -> dict[str, Any]:
    """Import the handler (or guard) file and call it: {kind: none | null | value, v?, effects?, completion?}."""
    file = PluginFile(server.plugin_id, Path(server.isolation.path_of(args.root)), args.file)
    entry, epoch = args.entry, args.epoch
    # Loaded already this turn: found on the loop; else imported (blocking work) in a plugin thread.
    handler = loaded_callable(file, entry, epoch=epoch) or await server.run_plugin(call, load_callable, file, entry, epoch=epoch)
    return result_message(await server.run_plugin(call, handler, SandboxFunctionContext(server, call, args.ctx)))


OPERATIONS: dict[str, Operation] = {"function": Operation(run_handler, FunctionArgs)}

"""The tools the kernel answers itself for one agent execution.

runtime-done (explicit completion), emit-event (declared topics), the dataset tools
`<dataset>-get/-list/-upsert/-update` generated from contributes.datasets, the story's
character look-ups (list-characters, get-character) and memory-search, and delegate
(subagents). Every answer has the unified tool result shape `{ok, data | error}`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from covel.gateway.v1 import gateway_pb2
from services.scheduler.execution.dataset_policies import dataset_schema
from services.scheduler.execution.player_effects import SHOWN_CHANNELS, ShownInvalid, check_shown
from services.scheduler.execution.plugin_data_view import PluginDataView
from shared import json_schemas
from shared.manifest import CompiledManifest
from shared.manifest.runtime import Dataset
from shared.plugin_data.operations import DELETED, MISSING, OperationError, apply_operations
from shared.plugin_sdk.characters import resolve_character
from shared.plugin_sdk.dataset_keys import dataset_key
from shared.plugin_sdk.tools import tool_error, tool_ok
from shared.structs import from_struct, to_struct

RUNTIME_DONE = "runtime-done"
EMIT_EVENT = "emit-event"
LIST_CHARACTERS = "list-characters"
GET_CHARACTER = "get-character"
MEMORY_SEARCH = "memory-search"
DELEGATE = "delegate"
DATASET_TOOL_KINDS = ("get", "list", "upsert", "update")
DATASET_LIST_LIMIT = 50

ToolHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass
class KernelTool:
    definition: gateway_pb2.ToolDefinition
    read_only: bool
    handler: ToolHandler
    # Kept for a subagent although not read-only (imported write services, spec: 子 agent 只读工具).
    subagent_keeps: bool = False


@dataclass
class KernelTools:
    """The kernel's tools of one execution, and what calling them produced."""

    tools: dict[str, KernelTool] = field(default_factory=dict)
    emitted: list[dict[str, Any]] = field(default_factory=list)
    done_called: bool = False
    # Proposals of the runtime's plugin tools ({type, payload}), and of imported write services
    # ({pluginId, type, payload}, attributed to the service's plugin); they commit only on success.
    tool_writes: list[dict[str, Any]] = field(default_factory=list)
    foreign_writes: list[dict[str, Any]] = field(default_factory=list)
    # The suspend tool's interaction once called (agent/suspension.py): the loop stops, suspended.
    suspension: dict[str, Any] | None = None
    # The root execution's subagent budget (execution/subagents.py SubagentBudget): a suspension keeps it.
    subagent_budget: Any = None
    # What the run's plugin tools showed (interactions, notifications, ui), and the first malformed one's problem.
    shown: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    shown_problem: str = ""
    # A plugin's own data as this run sees it (its own tool writes included), handed to the plugin's tools
    # and services it calls (ToolContext.get_plugin_data); None: they get none.
    plugin_data: Callable[[str], Awaitable[dict[str, dict[str, Any]]]] | None = None
    # The calling run's ctx.world as plain values, for its plugin tools' context.world; None: they get none.
    world: Callable[[], Awaitable[dict[str, Any]]] | None = None

    def note_shown(self, data: dict[str, Any]) -> None:
        """A plugin tool's result: its interactions, notifications and ui become the run's (checked; a malformed
        one fails the run at its end)."""
        for name in SHOWN_CHANNELS:
            items = data.get(name)
            if items is None:
                continue
            try:
                check_shown(name, items)
            except ShownInvalid as error:
                self.shown_problem = self.shown_problem or str(error)
                continue
            self.shown.setdefault(name, []).extend(items)

    def add(self, name: str, description: str, parameters: dict[str, Any], handler: ToolHandler, *, read_only: bool,
            subagent_keeps: bool = False) -> None:
        self.tools[name] = KernelTool(
            gateway_pb2.ToolDefinition(name=name, description=description, parameters=to_struct(parameters)), read_only, handler,
            subagent_keeps,
        )

    def definitions(self) -> dict[str, gateway_pb2.ToolDefinition]:
        return {name: tool.definition for name, tool in self.tools.items()}

    def names(self) -> list[str]:
        return list(self.tools)

    def __contains__(self, name: str) -> bool:
        return name in self.tools

    def is_read_only(self, name: str) -> bool:
        return name in self.tools and self.tools[name].read_only

    def restrict_to_read_only(self) -> None:
        """A subagent's tools: the read-only ones, and imported services (read and write alike)."""
        self.tools = {name: tool for name, tool in self.tools.items() if tool.read_only or tool.subagent_keeps}

    async def call(self, call: dict[str, Any]) -> str:
        tool = self.tools[call["name"]]
        try:
            args = json.loads(call.get("arguments") or "{}")
        except json.JSONDecodeError as error:
            return _text(tool_error("invalid-input", f"arguments are not JSON: {error}", "send the arguments as one JSON object"))
        if not isinstance(args, dict):
            return _text(tool_error("invalid-input", "arguments must be a JSON object"))
        problems = sorted(json_schemas.validator(_parameters(tool), draft_from_schema=False).iter_errors(args), key=lambda e: list(e.absolute_path))
        if problems:
            listed = "; ".join(f"{'/'.join(map(str, p.absolute_path)) or '(arguments)'}: {p.message}" for p in problems[:3])
            return _text(tool_error("invalid-input", listed, "call the tool again with arguments that fit its parameters"))
        return _text(await tool.handler(args))


def _parameters(tool: KernelTool) -> dict[str, Any]:
    return from_struct(tool.definition.parameters)


def _text(result: dict[str, Any]) -> str:
    return json.dumps(result, ensure_ascii=False)


def add_runtime_done(tools: KernelTools) -> None:
    async def done(_: dict[str, Any]) -> dict[str, Any]:
        tools.done_called = True
        return tool_ok({"done": True})

    tools.add(RUNTIME_DONE, "Finish this runtime: the work is done (or there was nothing to do).",
              {"type": "object", "properties": {"summary": {"type": "string"}}}, done, read_only=False)


def add_emit_event(tools: KernelTools, topics: list[str]) -> None:
    async def emit(args: dict[str, Any]) -> dict[str, Any]:
        tools.emitted.append({"topic": args["topic"], "payload": args.get("payload")})
        return tool_ok({"emitted": args["topic"]})

    tools.add(EMIT_EVENT, "Emit a plugin event; runtimes that follow its topic run after this turn's stages.",
              {"type": "object", "required": ["topic"], "properties": {
                  "topic": {"type": "string", "enum": list(topics)}, "payload": {"type": "object"}}},
              emit, read_only=False)


def wanted_datasets(manifest: CompiledManifest, declared: Mapping[str, Dataset]) -> dict[str, list[str]]:
    """agent.tools.datasets → {dataset: tool kinds} (the registry lists every provided tool for a bare name)."""
    wanted: dict[str, list[str]] = {}
    for item in manifest.agent_part.tools.datasets:
        if item.dataset not in declared:
            continue
        provided = provided_dataset_tools(declared[item.dataset])
        wanted[item.dataset] = [kind for kind in item.tools if kind in provided]
    return wanted


def provided_dataset_tools(declaration: Dataset) -> list[str]:
    """The dataset's tools as the registry compiled them: written, or derived from its ops."""
    return [kind for kind in declaration.tools if kind in DATASET_TOOL_KINDS]


def add_dataset_tools(tools: KernelTools, wanted: dict[str, list[str]], declared: Mapping[str, Dataset], package_root: str,
                      plugin_data: PluginDataView) -> None:
    """The generated tools read through the execution's plugin-data view and write as this runtime's proposals."""
    for name, kinds in wanted.items():
        declaration = declared[name]
        schema = dataset_schema(package_root, declaration)
        key_field = declaration.key
        about = f" {declaration.description}" if declaration.description else ""
        dataset_tools = _DatasetTools(tools, name, declaration, schema, key_field, about, plugin_data)
        for kind in kinds:
            dataset_tools.add(kind)


class _DatasetTools:
    """The generated tools of one dataset: <name>-get, -list, -upsert and -update."""

    def __init__(self, tools: KernelTools, name: str, declaration: Dataset, schema: dict[str, Any] | None,
                 key_field: str | None, about: str, plugin_data: PluginDataView) -> None:
        self.tools, self.name, self.schema, self.key_field, self.about = tools, name, schema, key_field, about
        self.ops = list(declaration.ops)
        self.plugin_data = plugin_data

    def add(self, kind: str) -> None:
        {"get": self._add_get, "list": self._add_list, "upsert": self._add_upsert}.get(kind, self._add_update)()

    async def _find(self, key: str) -> tuple[str, Any]:
        value = await self.plugin_data.get(self.name, key)
        if value is None and dataset_key(key) != key:
            normalized = dataset_key(key)
            value = await self.plugin_data.get(self.name, normalized)
            if value is not None:
                return normalized, value
        return key, value

    def _invalid(self, value: Any) -> dict[str, Any] | None:
        if self.schema is None:
            return tool_error("unavailable", f"the dataset {self.name} has no readable schema; nothing can be written")
        problems = sorted(json_schemas.validator(self.schema, draft_from_schema=False).iter_errors(value), key=lambda e: list(e.absolute_path))
        if not problems:
            return None
        listed = "; ".join(f"{'/'.join(map(str, p.absolute_path)) or '(value)'}: {p.message}" for p in problems[:3])
        return tool_error("invalid-input", f"the record does not fit the {self.name} schema: {listed}",
                          "fix the record and call again")

    def _add_get(self) -> None:
        name = self.name

        async def get(args: dict[str, Any]) -> dict[str, Any]:
            key, value = await self._find(args["key"])
            if value is None:
                return tool_error("not-found", f"no {name} record with key {args['key']!r}", f"call {name}-list to see the keys")
            return tool_ok({"key": key, "value": value})

        self.tools.add(f"{name}-get", f"Read one record of {name} by key.{self.about}",
                       {"type": "object", "required": ["key"], "properties": {"key": {"type": "string", "minLength": 1}}},
                       get, read_only=True)

    def _add_list(self) -> None:
        name = self.name

        async def list_records(args: dict[str, Any]) -> dict[str, Any]:
            records = await self.plugin_data.list(name)
            keys = sorted(records)
            offset, limit = int(args.get("offset", 0)), int(args.get("limit", DATASET_LIST_LIMIT))
            page = keys[offset:offset + limit]
            return tool_ok({"items": [{"key": key, "value": records[key]} for key in page], "total": len(keys)})

        self.tools.add(f"{name}-list", f"List the records of {name} (sorted by key).{self.about}",
                       {"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 200},
                                                         "offset": {"type": "integer", "minimum": 0}}},
                       list_records, read_only=True)

    def _add_upsert(self) -> None:
        name, key_field = self.name, self.key_field

        async def upsert(args: dict[str, Any]) -> dict[str, Any]:
            value = args["value"]
            key = args.get("key") or (value.get(key_field) if key_field and isinstance(value, dict) else None)
            if not isinstance(key, str) or not key:
                return tool_error("invalid-input", f"key is required (or the record's {key_field or 'key'} field)")
            problem = self._invalid(value)
            if problem:
                return problem
            await self.plugin_data.set(name, key, value)
            return tool_ok({"key": key, "value": value})

        required = ["value"] if key_field else ["key", "value"]
        # The model sees the record's shape; the record is checked against the full schema either way.
        value_shape = {key: item for key, item in (self.schema or {}).items()
                       if key in ("type", "properties", "required", "description")}
        if '"$ref"' in json.dumps(value_shape):
            value_shape = {}  # references would not resolve inside the tool's parameters
        self.tools.add(f"{name}-upsert", f"Create or replace one record of {name}.{self.about}",
                       {"type": "object", "required": required, "properties": {
                           "key": {"type": "string", "minLength": 1}, "value": value_shape or {"type": "object"}}},
                       upsert, read_only=False)

    def _add_update(self) -> None:
        name, ops = self.name, self.ops

        async def update(args: dict[str, Any]) -> dict[str, Any]:
            operations = args["operations"]
            refused = [op.get("op") for op in operations if isinstance(op, dict) and ops and op.get("op") not in ops]
            if refused:
                return tool_error("invalid-input", f"the {name} dataset does not allow {', '.join(map(str, refused))}",
                                  f"use one of: {', '.join(ops)}")
            key, current = await self._find(args["key"])
            try:
                value = apply_operations(MISSING if current is None else current, operations)
            except OperationError as error:
                return tool_error("invalid-input", str(error), "fix the operations and call again")
            if value not in (MISSING, DELETED):
                problem = self._invalid(value)
                if problem:
                    return problem
            await self.plugin_data.update(name, key, operations)
            return tool_ok({"key": key, "value": None if value in (MISSING, DELETED) else value})

        self.tools.add(f"{name}-update", f"Change one record of {name} with operations (set, merge, inc, append, …).{self.about}",
                       {"type": "object", "required": ["key", "operations"], "properties": {
                           "key": {"type": "string", "minLength": 1},
                           "operations": {"type": "array", "minItems": 1, "items": {
                               "type": "object", "required": ["op"],
                               "properties": {"op": {"type": "string"}, "path": {"type": "string"}}}}}},
                       update, read_only=False)


LoadCharacters = Callable[[], Awaitable[list[dict[str, Any]]]]


def add_character_tools(tools: KernelTools, load_characters: LoadCharacters) -> None:
    """list-characters / get-character: the session's characters, resolved by id, name or alias."""

    async def list_characters(_: dict[str, Any]) -> dict[str, Any]:
        characters = await load_characters()
        return tool_ok({"characters": [
            {"id": c["id"], "name": c.get("name", c["id"]), **({"aliases": c["aliases"]} if c.get("aliases") else {})}
            for c in characters]})

    async def get_character(args: dict[str, Any]) -> dict[str, Any]:
        found = resolve_character(await load_characters(), args["name"])
        if found["status"] == "found":
            return tool_ok(found["character"])
        if found["status"] == "ambiguous":
            return tool_error("ambiguous", f"{len(found['candidates'])} characters are called {args['name']!r}", "ask by id")
        nearest = found["nearest"]
        near = f"; the nearest is {nearest.get('name', nearest['id'])} ({nearest['id']})" if nearest else ""
        return tool_error("not-found", f"no character {args['name']!r}{near}", f"call {LIST_CHARACTERS} to see who there is")

    tools.add(LIST_CHARACTERS, "List the characters of this story (id, name, aliases).", {"type": "object", "properties": {}},
              list_characters, read_only=True)
    tools.add(GET_CHARACTER, "Read one character's full record, by id, name or alias.",
              {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}}},
              get_character, read_only=True)


# -> {"results": [...], "method": "hybrid" | "bm25"} (services/scheduler/agent/memory_search.py).
Search = Callable[[str, int], Awaitable[dict[str, Any]]]


def add_memory_search(tools: KernelTools, search: Search) -> None:
    async def memory_search(args: dict[str, Any]) -> dict[str, Any]:
        return tool_ok(await search(args["query"], int(args.get("limit", 5))))

    tools.add(MEMORY_SEARCH, "Search what the story remembers (facts and memories kept by plugins, the lorebook, the "
              "characters) by words and by meaning: ask in your own words.",
              {"type": "object", "required": ["query"], "properties": {
                  "query": {"type": "string", "minLength": 1, "maxLength": 500},
                  "limit": {"type": "integer", "minimum": 1, "maximum": 20}}},
              memory_search, read_only=True)

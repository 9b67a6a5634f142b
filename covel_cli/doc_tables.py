"""The field tables of docs/plugins.md and docs/settings.md, generated from the models, and
docs/retries.md's table of each method's deadline and retry rule (shared/grpc_client.py).

It lives in covel_cli, next to `covel validate-plugin`, because it is a developer tool that
reads several services' models (the registry's manifest models, every service's settings);
shared/ must not import a service. Run `python -m covel_cli.doc_tables --write` after changing
a manifest or settings model or the channels' tables; tests/docs/test_generated_tables.py fails
until the docs match.

A table sits between marker comments and is replaced whole:

    <!-- generated: manifest-fields:RuntimeDecl -->
    …
    <!-- end generated -->

`manifest-fields:<Model>` is one manifest group (services/registry/manifest_models.py),
`settings:<service>` one settings model (`shared` for what every service reads), `channel-rules`
the deadlines and retries of every method our channels call. Meanings live
here rather than as Field(description=…) on the models, because the models' files are edited by
other work at the same time; every field must have one, so a new field fails the test.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from annotated_types import Ge, Le, MaxLen, MinLen
from pydantic import AfterValidator, BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from services.gateway.settings import GatewaySettings
from services.hooks.settings import HooksSettings
from services.registry import manifest_models as manifest
from services.registry import runtime_compiler as compiler
from services.registry import world_models
from services.registry.settings import RegistrySettings, default_pack_files, default_world_dirs
from services.scheduler.settings import SchedulerSettings
from services.store.settings import StoreSettings
from services.web.settings import WebSettings
from shared import grpc_client
from shared.manifest import CompiledManifest, PackageDefinition
from shared.manifest.runtime import FUNCTION_SLOT_WHEN_UNWRITTEN
from shared.sandbox.settings import SandboxSettings
from shared.security import policy
from shared.settings import REPO_ROOT, ServiceSettings, default_data_dir, default_oidc_algorithms, default_plugin_dirs

DOC_FILES = (REPO_ROOT / "docs" / "plugins.md", REPO_ROOT / "docs" / "settings.md", REPO_ROOT / "docs" / "retries.md",
             REPO_ROOT / "docs" / "security.md", REPO_ROOT / "docs" / "api.md", REPO_ROOT / "README.md")
# docs/worlds.md's tables come from covel_cli/world_doc_tables.py, docs/hookspecs.md's from covel_cli/hookspec_doc_tables.py.
WORLD_DOC_FILES = (REPO_ROOT / "docs" / "worlds.md", REPO_ROOT / "docs" / "hookspecs.md")
BLOCK = re.compile(r"(<!-- generated: (?P<key>[\w:.-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL)
WRITE_COMMAND = "python -m covel_cli.doc_tables --write"


class MissingMeaning(LookupError):
    """A model field without a meaning in this module's tables."""


# ----- manifest fields -------------------------------------------------------------------------

ROOT_MODEL = manifest.PluginManifest
# Fields whose named validator says more than their base type.
VALIDATED_TYPES: dict[Callable[..., Any], str] = {
    manifest._contract_id: "contract id (`name@N`)",
    manifest._hook_event: "hook event name",
    manifest._action_name: "action name",
    manifest._https_link: "https URL",
    world_models._item_id: "id (letters, digits, `.`, `_`, `-`)",
    world_models._plugin_id: "plugin id",
    world_models._contract_target: "`contract:<id>`",
}


def _loop_limit(index: int) -> str:
    story, system = compiler.LOOP_LIMITS["story"][index], compiler.LOOP_LIMITS["system"][index]
    return f"`{story}` (story), `{system}` (system)"


def _profile_default(key: str) -> str:
    return ", ".join(f"`{_literal(values[key])}` ({profile})" for profile, values in compiler.LOOP_PROFILES.items())


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# Defaults the kernel fills in when the author leaves a field out ("—" where none is decided).
MANIFEST_DEFAULTS: dict[str, str] = {
    "DependencyRef.cardinality": "`one`",
    "InputSource.cardinality": "`one`",
    "Trigger.type": "`auto` (`manual` for subagentOnly)",
    "Schedule.every": "`1`",
    "Schedule.detached": "`false`",
    "Schedule.background": "`false`",
    "Schedule.subagentOnly": "`false`",
    "DetachedOptions.settle": "`false`",
    "DetachedOptions.maxSettleWaitMs": f"`{compiler.DEFAULT_SETTLE_WAIT_MS}`",
    "InputBinding.scope": "`turn`",
    "InputBinding.required": "`true`",
    "SelfData.format": f"`{compiler.DEFAULT_SELF_DATA_FORMAT}`",
    "SelfData.maxEntries": f"`{compiler.DEFAULT_SELF_DATA_MAX_ENTRIES}`",
    "IO.visibility": "`system`",
    "IO.concealed": "`false`",
    "Agent.model": "`story` (story runtimes), `plugin`",
    "Agent.reasoning": "`true`",
    "Agent.toolChoice": "`required` with finishWith",
    "AgentTools.plugin": "an inline runtime: all of contributes.tools; else none",
    "Loop.profile": "`story` (story), `actor` (subagentOnly), `system`",
    "Loop.timeoutMs": _loop_limit(0),
    "Loop.callTimeoutMs": _loop_limit(1),
    "Loop.maxRetries": _loop_limit(2),
    "Loop.idleTimeoutMs": f"`{compiler.DEFAULT_IDLE_TIMEOUT_MS}`",
    "Loop.loopDetection": f"`{compiler.DEFAULT_LOOP_DETECTION}`",
    "Loop.maxRecursionDepth": f"`{compiler.DEFAULT_MAX_RECURSION_DEPTH}`",
    "Loop.maxSteps": f"`{compiler.DEFAULT_MAX_STEPS}`",
    "Loop.stream": _profile_default("stream"),
    "Loop.steering": _profile_default("steering"),
    "Loop.truncation": _profile_default("truncation"),
    "Loop.fallback": _profile_default("fallback"),
    "Loop.finalizer": "`{maxSteps: true, deadlineReserveMs: 0}`",
    "Finalizer.maxSteps": "`true`",
    "Finalizer.deadlineReserveMs": "`0`",
    **{f"Corrections.{name}": f"`{value}`" for name, value in compiler.DEFAULT_CORRECTIONS.items()},
    "Function.handler": f"`{compiler.DEFAULT_HANDLER}`",
    "Function.model": f"`{FUNCTION_SLOT_WHEN_UNWRITTEN}`",
    "Function.timeoutMs": f"`{compiler.DEFAULT_FUNCTION_TIMEOUT_MS}`",
    "HookDecl.enforce": "`normal`",
    "DatasetDecl.ops": "all of them",
    "DatasetDecl.tools": "`get`, `list`; `upsert` with `set`; `update` with any other op",
    "PluginManifest.id": "the folder name",
    "PluginManifest.kind": "`plugin`",
}

MANIFEST_MEANINGS: dict[str, str] = {
    # root
    "PluginManifest.id": "The plugin id; written, it must equal the package folder's name (`framework` is reserved).",
    "PluginManifest.kind": "`core`: on in every session unless excluded; `plugin`: on when a session requests it.",
    "PluginManifest.version": "The package version; a change reruns its setup runtimes.",
    "PluginManifest.displayName": "The name clients show.",
    "PluginManifest.description": "One line about the plugin, for clients and catalogues.",
    "PluginManifest.tags": "Catalogue tags.",
    "PluginManifest.author": "The author: a name, or `{name, url, about, links}`.",
    "PluginManifest.license": "A license name, e.g. `MIT`.",
    "PluginManifest.homepage": "The project page.",
    "PluginManifest.covel": "The host versions the package is written for, e.g. `>=0.1.0 <0.3`; outside it the package is neither installed nor loaded.",
    "PluginManifest.provides": "Contracts this package provides; `{contract, default: true}` marks the provider chosen when several could fill a `requires`.",
    "PluginManifest.requires": "Contracts an active plugin must provide; a missing one pulls in an installed provider, or rejects the plugin.",
    "PluginManifest.conflicts": "Contracts that cannot run next to this plugin: of two, the one accepted later is rejected.",
    "PluginManifest.contracts": "Contracts this package defines, each with the JSON Schema file of its value.",
    "PluginManifest.entry": "The entry module (hooks, tools, services, extensions), usually `./server/index.py`.",
    "PluginManifest.permissions": "What the package's code may reach (HTTP origins), for every runtime and the entry module.",
    "PluginManifest.contributes": "What the package adds to the host: tools, hooks, settings, data, datasets, prompt segments, ….",
    "PluginManifest.runtime": "The one inline runtime; the body of PLUGIN.md is its prompt. Not together with `runtimes/`.",
    "Author.name": "The author's name.",
    "Author.url": "The author's page.",
    "Author.about": "A few words about the author.",
    "Author.links": "Up to 6 further links.",
    "AuthorLink.label": "The link's text.",
    "AuthorLink.url": "Where it points.",
    "ProvidesDecl.contract": "The provided contract.",
    "ProvidesDecl.default": "This package is the provider picked for the contract when no active plugin provides it.",
    "ContractDecl.schema": "The JSON Schema of the contract's value: a package-relative file (`./schemas/x.json`).",
    "Permissions.http": "Origins (and methods) that `covel.http` and `ctx.http` may call; anything else fails before it is sent.",
    "HttpPermission.origin": "A bare `scheme://host[:port]` origin (no path, query or credentials).",
    "HttpPermission.methods": "Allowed methods; left out: every method.",
    # runtime
    "RuntimeDecl.type": "Worked out from the `function` block; written, it only warns (a contradicting one is an error).",
    "RuntimeDecl.schedule": "When the runtime runs.",
    "RuntimeDecl.io": "What it reads, what it answers, who sees it.",
    "RuntimeDecl.agent": "An agent runtime's model, tools and loop.",
    "RuntimeDecl.function": "Makes the runtime a function: a Python handler instead of a model.",
    "RuntimeDecl.guard": "A `guard.py` whose `guard(ctx)` may skip the runtime by returning `{\"skip\": True, ...output}`.",
    "RuntimeDecl.effects": "Effects the runtime declares; kept in the compiled manifest as written.",
    "RuntimeDecl.permissions": "This runtime's own HTTP permissions, added to the package's for its handler and guard.",
    "Schedule.stage": "The stage an auto runtime runs in; required for `auto`, not allowed otherwise.",
    "Schedule.every": "Run only on logical turns divisible by this.",
    "Schedule.trigger": "How the runtime is started: each turn, by hand, or by an event.",
    "Schedule.needs": "Runtimes or contracts that must succeed first; a failed one skips this runtime.",
    "Schedule.after": "Runtimes or contracts to wait for, whatever their outcome.",
    "Schedule.detached": "post-turn and audit only: run as a job after the turn committed (`true` or options).",
    "Schedule.background": "manual and event runtimes: run as their own execution outside the turn.",
    "Schedule.subagentOnly": "Only runs as a subagent (`ctx.agents.run`, the `delegate` tool); an agent, never story.",
    "DependencyRef.runtime": "A runtime of this package, by its id.",
    "DependencyRef.contract": "Whatever active runtime answers this contract.",
    "DependencyRef.cardinality": "`one` provider or `all` of them.",
    "Trigger.type": "`auto` (selected each turn by stage), `manual` (RunManual, commands), `event` (emitted topics).",
    "Trigger.startTurn": "The first logical turn it may run in.",
    "Trigger.cooldownTurns": "Turns to skip after each run.",
    "Trigger.maxTriggerCount": "How many times it may run in a session.",
    "Trigger.event": "Event runtimes: the topic they follow.",
    "Trigger.events": "Event runtimes: several topics.",
    "DetachedOptions.settle": "Kept with the job; the kernel does not wait on it yet.",
    "DetachedOptions.maxSettleWaitMs": "Kept with the job's snapshot.",
    "DetachedOptions.maxQueueMs": "A job still queued after this is timed out (store default 600000).",
    "DetachedOptions.coalesce": "A new job of this runtime supersedes its jobs of the session still queued (status `superseded`): for a runtime that only needs the latest turn, not every one.",
    "DetachedOptions.maxExecutionMs": "A job still running after this is timed out (store default 300000).",
    "IO.inputs": "Named input bindings; a handler reads `ctx.inputs[name][\"value\"]`, an agent `<runtime-inputs>`.",
    "IO.selfData": "The runtime's own plugin data shown in its prompt, one row per key.",
    "IO.payloadSchema": "The schema of a manual or event runtime's activation payload (a file or an inline schema).",
    "IO.output": "The output contract or schema the answer is checked against.",
    "IO.visibility": "`story`: its output is the story the player reads; `system`: kernel-internal.",
    "IO.concealed": "Keep the output and failure reasons away from clients (not for story runtimes).",
    "InputBinding.from": "Where the value comes from: a runtime, a contract or a kernel input.",
    "InputBinding.select": "A JSON Pointer into the value (not with `scope: committed`).",
    "InputBinding.accepts": "A schema the value must pass; an optional input that fails is left out.",
    "InputBinding.scope": "`turn`: this turn's upstream result; `committed`: the latest export of an earlier turn.",
    "InputBinding.recordAs": "With `scope: committed`: the export name to read.",
    "InputBinding.required": "A missing required input skips the runtime; story runtimes must make contract inputs optional.",
    "InputSource.contract": "A contract some active runtime answers.",
    "InputSource.runtime": "A runtime of this package.",
    "InputSource.kernel": "A kernel input: `turn-digest@1`, `operations@1`, `world.dimensions@1` or `session.world-context@1` (no other option allowed).",
    "InputSource.cardinality": "`one` value or `all` providers' values.",
    "SelfData.namespace": "The plugin data namespace to show.",
    "SelfData.as": "The label the prompt uses for it.",
    "SelfData.format": "`summary` (values cut short) or `full`.",
    "SelfData.maxEntries": "At most this many keys.",
    "Output.contract": "The contract the answer fulfils; its schema checks it.",
    "Output.schema": "A schema the answer must fit (a file, or `contract:<id>`).",
    "Output.recordAs": "Keep the output as a named export when its turn commits.",
    # agent
    "Agent.model": "The gateway slot (`story`, `plugin`, `memory`, `fast`, …).",
    "Agent.toolChoice": "`auto`, `required`, `none` or `{name}` of one tool.",
    "Agent.reasoning": "Kept in the compiled manifest; no provider acts on it yet.",
    "Agent.history": "How much conversation history the prompt carries.",
    "Agent.tools": "Which tools the agent gets.",
    "Agent.finishWith": "A tool whose call ends the loop (same as `completion: {require: tool-use, afterTools: [it]}`).",
    "Agent.completion": "When the loop is done (not together with finishWith).",
    "Agent.loop": "How the agent loop behaves.",
    "HistoryWindow.maxTurns": "Player turns of history (story default: COVEL_SCHEDULER_HISTORY_MAX_TURNS).",
    "HistoryWindow.includeSummaries": "`false` leaves compaction summaries out.",
    "AgentTools.plugin": "Tools of this package's `contributes.tools`, and `suspend` (the kernel's: ask the player and wait).",
    "AgentTools.services": "Other plugins' model-facing services as tools: a contract id or `{contract, as}`.",
    "AgentTools.datasets": "Dataset tools: a dataset name (all its tools) or `{dataset, tools}`.",
    "ServiceImport.contract": "The service contract, e.g. `notes.search@1` (tool `notes-search`).",
    "ServiceImport.as": "Another tool name.",
    "DatasetImport.dataset": "A dataset of this package.",
    "DatasetImport.tools": "Which of its tools: `get`, `list`, `upsert`, `update`.",
    "NamedToolChoice.name": "The one tool the model must call.",
    "Completion.require": "`tool-use` (done after a tool of afterTools) or `explicit` (adds the `runtime-done` tool; not for story).",
    "Completion.afterTools": "The tools that complete the loop.",
    "Loop.profile": "The preset of stream, steering, truncation and fallback.",
    "Loop.timeoutMs": "The whole loop's time limit.",
    "Loop.callTimeoutMs": "One model call's time limit.",
    "Loop.maxRetries": "Retries of a failed model call.",
    "Loop.maxSteps": "At most this many steps (then the finalizer).",
    "Loop.firstTokenTimeoutMs": "A streamed call's wait for its first token.",
    "Loop.idleTimeoutMs": "A streamed call's longest silence between tokens.",
    "Loop.loopDetection": "The same call repeated this often triggers the fallback.",
    "Loop.maxRecursionDepth": "How deep `ctx.recursive_call` may nest.",
    "Loop.stream": "Stream the story to the client as it is written (story only).",
    "Loop.steering": "Merge the player's `Interject` messages before each step (story only).",
    "Loop.truncation": "`accept` a reply cut off by its length limit (needs stream) or `reject` it.",
    "Loop.fallback": "On a detected loop: `answer-without-tools` or `fail`.",
    "Loop.finalizer": "`false`, or when to ask once more, tools off, for the answer.",
    "Loop.corrections": "Budgets of corrective re-prompts.",
    "Finalizer.maxSteps": "Ask for the answer when maxSteps is reached.",
    "Finalizer.deadlineReserveMs": "Ask for the answer this long before timeoutMs (less than it).",
    "Corrections.toolUse": "Re-prompts when the answer comes before the completion condition holds (a tool must be called).",
    "Corrections.review": "Corrections a `PostLLMResponse` hook may ask for (it returns `correction`).",
    "Corrections.loopPerturbation": "Re-prompts to break a repeated call before the fallback.",
    "Corrections.outputRepair": "Repairs (tools off) of an answer that does not fit its schema.",
    # function
    "Function.handler": "The module whose `handler(ctx)` runs (a `.js` path loads the `.py` of the same stem).",
    "Function.model": "The gateway slot of `ctx.gateway`.",
    "Function.timeoutMs": "The handler's time limit.",
    "Function.tools": "Plugin tools `ctx.tools.call` may use.",
    # contributes
    "Contributes.tools": "Tool names the entry module registers with `covel.register_tool`.",
    "Contributes.actions": "Actions the entry answers with `covel.register_rpc` (not `covel:`, `runtime:`, `event:`).",
    "Contributes.commands": "Slash commands; each `action` must be in `actions`.",
    "Contributes.services": "Service contracts the entry registers with `covel.register_service`.",
    "Contributes.extensions": "Extension providers, `<point>/<id>` or `{point, id, order, slot}`.",
    "Contributes.hooks": "Hook events the entry subscribes to: a name or `{event, enforce}`.",
    "Contributes.forms": "Form ids the entry validates with `covel.register_form_validator`.",
    "Contributes.events": "Event topics the package emits (one declarer per session).",
    "Contributes.settings": "Player-facing settings, read as `ctx.user_settings` / `get_own_settings()`.",
    "Contributes.data": "Plugin data namespaces with a schema, version, accepted contracts, search.",
    "Contributes.datasets": "Typed namespaces with kernel tools and operations.",
    "Contributes.actionKinds": "Action types players can submit (`<pluginId>/<name>` on the wire).",
    "Contributes.ui": "Client UI by location (`right`, `message`, `view`, `segment`); other keys are dropped.",
    "Contributes.worldProjections": "World projections; each `handler` must be a module in the package.",
    "Contributes.prompt": "Static prompt segments.",
    "Contributes.wires": "Kept as written; the kernel does not act on it yet.",
    "HookDecl.event": "The hook event.",
    "HookDecl.enforce": "The handler group: `pre`, `normal` or `post`.",
    "SettingDecl.key": "The setting's key (unique in the package).",
    "SettingDecl.type": "Its type (e.g. `string`, `number`, `boolean`, `select`).",
    "SettingDecl.label": "The label clients show.",
    "SettingDecl.description": "Help text.",
    "SettingDecl.default": "The value when the player sets none; it must pass the declaration's own rules.",
    "SettingDecl.options": "A `select`'s choices: values or `{value, label}`.",
    "SettingDecl.min": "The smallest number allowed.",
    "SettingDecl.max": "The largest number allowed.",
    "SettingDecl.step": "The step clients offer.",
    "SettingDecl.placeholder": "Placeholder text for clients.",
    "ServiceDecl.contract": "The service contract.",
    "ServiceDecl.modelFacing": "Agents may import it as a tool (`agent.tools.services`).",
    "ServiceDecl.access": "`read`, or `write` (it may stage changes).",
    "ExtensionDecl.point": "The extension point, e.g. `history.compact@2`.",
    "ExtensionDecl.id": "The provider's id (no `/`).",
    "ExtensionDecl.order": "Order among providers of the point.",
    "ExtensionDecl.slot": "The slot it fills, where the point has slots.",
    "EventDecl.topic": "The event topic.",
    "EventDecl.schema": "The schema of its payload.",
    "EventDecl.description": "What the event means.",
    "EventDecl.advertise": "`false` keeps the topic out of what story runtimes may emit.",
    "DataDecl.schema": "The schema of each record.",
    "DataDecl.version": "The namespace's data version.",
    "DataDecl.accepts": "Contracts whose values this namespace accepts.",
    "DataDecl.search": "Make records searchable (`memory-search`).",
    "DataDecl.authoring": "Authoring options; only with `accepts`.",
    "DataSearch.text": "The record field searched (BM25).",
    "DatasetDecl.schema": "The schema every record is checked against before it is written.",
    "DatasetDecl.key": "The record field that is its key.",
    "DatasetDecl.ops": "Operations allowed on records (`set`, `merge`, `inc`, `append`, `insert`, `remove`, `upsertItem`, `delete`).",
    "DatasetDecl.tools": "Kernel tools it offers: `get`, `list`, `upsert`, `update`.",
    "DatasetDecl.description": "What the dataset holds (the tools' description).",
    "ActionKindDecl.name": "The action's name.",
    "ActionKindDecl.roles": "Who may submit it.",
    "ActionKindDecl.text": "Whether it carries text: `required`, `optional`, `none`.",
    "ActionKindDecl.actor": "Whether it names an acting character.",
    "ActionKindDecl.schema": "The schema of its data.",
    "ActionKindDecl.display": "How clients show it.",
    "ActionKindDisplay.label": "Its label.",
    "ActionKindDisplay.icon": "Its icon.",
    "ActionKindDisplay.placeholder": "Placeholder text of its input.",
    "PromptSegment.id": "The segment's id.",
    "PromptSegment.content": "The text (a `zh` session reads the PLUGIN.zh.md variant).",
    "PromptSegment.position": "`system`, `pre-history`, `post-history` or `{depth: N}`.",
    "PromptSegment.role": "The message role: `system`, `user`, `assistant`.",
    "PromptDepth.depth": "Messages from the end of the history.",
}


@functools.cache
def manifest_models() -> dict[str, tuple[type[BaseModel], list[str]]]:
    """Every model reachable from PluginManifest, in first-reached order, with where authors write it."""
    found: dict[str, tuple[type[BaseModel], list[str]]] = {ROOT_MODEL.__name__: (ROOT_MODEL, ["PLUGIN.md"])}
    queue: list[tuple[type[BaseModel], str]] = [(ROOT_MODEL, "")]
    while queue:
        model, prefix = queue.pop(0)
        hints = typing.get_type_hints(model, include_extras=True)
        for name, info in model.model_fields.items():
            path = f"{prefix}{info.alias or name}"
            for child, suffix in _models_in(hints[name]):
                if child.__name__ not in found:
                    found[child.__name__] = (child, [])
                    queue.append((child, f"{path}{suffix}."))
                found[child.__name__][1].append(f"{path}{suffix}")
    found["RuntimeDecl"][1].append("runtimes/<id>/RUNTIME.md")
    return found


def _models_in(tp: Any, suffix: str = "") -> Iterator[tuple[type[BaseModel], str]]:
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        yield tp, suffix
    elif origin is Annotated:
        yield from _models_in(typing.get_args(tp)[0], suffix)
    elif origin in (Union, types.UnionType):
        for arg in typing.get_args(tp):
            yield from _models_in(arg, suffix)
    elif origin is list:
        yield from _models_in(typing.get_args(tp)[0], suffix + "[]")
    elif origin is dict:
        yield from _models_in(typing.get_args(tp)[1], suffix + ".<name>")


def author_type(tp: Any) -> str:
    """A type as a plugin author reads it: string, integer ≥ 1, one of a|b, list of …."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        for extra in extras:
            if isinstance(extra, AfterValidator) and extra.func in VALIDATED_TYPES:
                return VALIDATED_TYPES[extra.func]
        constraints = [item for extra in extras for item in (extra.metadata if isinstance(extra, FieldInfo) else [extra])]
        return _constrained(author_type(base), constraints)
    if origin in (Union, types.UnionType):
        return " or ".join(author_type(arg) for arg in typing.get_args(tp) if arg is not type(None))
    if origin is Literal:
        return "one of " + "\\|".join(str(value) for value in typing.get_args(tp))
    if origin is list:
        return f"list of {author_type(typing.get_args(tp)[0])}"
    if origin is dict:
        value = typing.get_args(tp)[1]
        return "object" if value is Any else f"map of name → {author_type(value)}"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return f"[{tp.__name__}](#{tp.__name__.lower()})"
    return SCALARS.get(tp, getattr(tp, "__name__", str(tp)))


SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", Any: "any"}


def _constrained(base: str, constraints: list[Any]) -> str:
    low = next((c.ge for c in constraints if isinstance(c, Ge)), None)
    high = next((c.le for c in constraints if isinstance(c, Le)), None)
    shortest = next((c.min_length for c in constraints if isinstance(c, MinLen)), None)
    longest = next((c.max_length for c in constraints if isinstance(c, MaxLen)), None)
    if low is not None and high is not None:
        return f"{base} {low}–{high}"
    if low is not None:
        return f"{base} ≥ {low}"
    if high is not None:
        return f"{base} ≤ {high}"
    if base.startswith("list of") and shortest:
        return f"non-empty {base}" if longest is None else f"{base} (at most {longest})"
    if base.startswith("list of") and longest:
        return f"{base} (at most {longest})"
    if base == "string" and shortest:
        return "string" if longest is None else f"string of at most {longest}"
    if base == "string" and longest:
        return f"string of at most {longest}"
    return base


def manifest_table(name: str) -> str:
    model, paths = manifest_models()[name]
    hints = typing.get_type_hints(model, include_extras=True)
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for field_name, info in model.model_fields.items():
        key = f"{name}.{info.alias or field_name}"
        if key not in MANIFEST_MEANINGS:
            raise MissingMeaning(f"{key}: add its meaning to MANIFEST_MEANINGS in covel_cli/doc_tables.py")
        default = "required" if info.is_required() else MANIFEST_DEFAULTS.get(key, "—")
        rows.append(f"| `{info.alias or field_name}` | {author_type(hints[field_name])} | {default} | {MANIFEST_MEANINGS[key]} |")
    where = ", ".join(f"`{path}`" for path in paths)
    return f"#### {name}\n\nWritten at {where}.\n\n" + "\n".join(rows) + "\n"


# ----- compiled manifests ----------------------------------------------------------------------

# What the registry serves (shared/manifest), by where it travels.
COMPILED_MODELS: dict[str, tuple[type[BaseModel], str]] = {
    "CompiledManifest": (CompiledManifest, "RuntimeManifest.manifest"),
    "PackageDefinition": (PackageDefinition, "PluginPackage.definition"),
}


def compiled_type(tp: Any) -> str:
    """A compiled field's JSON type; nested models read as `object` (their fields have rows of their own)."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(dict.fromkeys(compiled_type(arg) for arg in typing.get_args(tp) if arg is not type(None)))
    if origin is Literal:
        values = typing.get_args(tp)
        return _literal(values[0]) if len(values) == 1 else "one of " + "\\|".join(_literal(value) for value in values)
    if origin is list:
        return f"list of {compiled_type(typing.get_args(tp)[0])}"
    if origin is dict:
        value = typing.get_args(tp)[1]
        return "object" if value is Any else f"map of name → {compiled_type(value)}"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "object"
    return SCALARS.get(tp, getattr(tp, "__name__", str(tp)))


def _compiled_rows(model: type[BaseModel], prefix: str, alternative: str = "") -> Iterator[str]:
    """One row per field, nested ones after their parent; `alternative` names the model of a field
    that holds one of several (an input is a binding or a kernel input)."""
    hints = typing.get_type_hints(model, include_extras=True)
    for name, info in model.model_fields.items():
        path = f"{prefix}{info.alias or name}"
        present = ("always" if info.is_required() else "when set") + (f" ({alternative})" if alternative else "")
        yield f"| `{path}` | {compiled_type(hints[name])} | {present} |"
        children = list(_models_in(hints[name]))
        for child, suffix in children:
            yield from _compiled_rows(child, f"{path}{suffix}.", child.__name__ if len(children) > 1 else alternative)


def compiled_table(name: str) -> str:
    model, wire = COMPILED_MODELS[name]
    rows = ["| field | type | present |", "|---|---|---|", *_compiled_rows(model, "")]
    return f"#### {name}\n\nServed as `{wire}`.\n\n" + "\n".join(rows) + "\n"


# ----- settings --------------------------------------------------------------------------------

# One table per settings model; a service's table lists what it adds to the shared settings.
SETTINGS_MODELS: dict[str, type[BaseSettings]] = {
    "shared": ServiceSettings,
    "registry": RegistrySettings,
    "scheduler": SchedulerSettings,
    "hooks": HooksSettings,
    "gateway": GatewaySettings,
    "store": StoreSettings,
    "sandbox": SandboxSettings,
    "web": WebSettings,
}
# Defaults computed at start, by the factory's name.
FACTORY_DEFAULTS: dict[str, str] = {
    default_data_dir.__name__: "`./.covel` (in the working directory)",
    default_plugin_dirs.__name__: "the repository's `plugins/`",
    default_world_dirs.__name__: "the repository's `worlds/`",
    default_pack_files.__name__: "the repository's `packs/builtin.yaml`",
    default_oidc_algorithms.__name__: "`RS256,ES256`",
    "_instance_id": "`<host name>-<8 hex digits>`",
    "dict": "(empty)",
    "list": "(empty)",
}
SETTING_TYPES: dict[Any, str] = {"Path": "path", "SecretStr": "secret string", "dict": "JSON object"}

SETTING_MEANINGS: dict[str, str] = {
    # shared/sandbox/settings.py: every service that runs plugin code (hooks, scheduler, registry probe)
    "sandbox_enabled": "Plugin code runs in sandbox worker processes; `false` runs it inside the service (debugging only: it then reaches every secret).",
    "sandbox_drop_privileges": "A service running as root starts its workers as `COVEL_SANDBOX_UID`/`GID`, with no new privileges.",
    "sandbox_uid": "The uid workers run as when privileges are dropped (nobody).",
    "sandbox_gid": "The gid workers run as when privileges are dropped.",
    "sandbox_namespaces": "Private PID and mount namespaces (their own `/proc`) where the kernel allows.",
    "sandbox_hide_dirs": "With the namespaces: an empty tmpfs over the data dir and `/tmp`.",
    "sandbox_pass_env": "Environment variables passed to workers, comma-separated (none by default; every other variable is dropped).",
    "sandbox_memory_mb": "A worker's address-space limit.",
    "sandbox_cpu_s": "A worker's CPU seconds over its life; past them it is replaced.",
    "sandbox_open_files": "A worker's open-file limit.",
    "sandbox_processes": "Processes and threads of the sandbox uid (set only when dropping to it).",
    "sandbox_stop_grace_ms": "How long a worker has to confirm a stopped call before it counts as hung and is killed.",
    "sandbox_start_timeout_s": "How long a new worker may take to start (isolation and imports).",
    # shared: addresses
    "registry_addr": "Where the registry listens and where the others find it.",
    "hooks_addr": "Where the hooks service listens and where the others find it.",
    "gateway_addr": "Where the gateway listens and where the others find it.",
    "store_addr": "Where the store listens and where the others find it.",
    "scheduler_addr": "Where the scheduler listens and where clients find it.",
    # shared: security
    "api_token": "The bearer token the scheduler's client API requires (`authorization: Bearer <token>`); the CLI sends it.",
    "api_token_file": "The same token read from a file (a mounted Secret), whitespace around it dropped; not together with COVEL_API_TOKEN.",
    "tls_cert_file": "This process's certificate chain (PEM): servers serve TLS with it, clients present it.",
    "tls_key_file": "The private key of that certificate (PEM).",
    "tls_ca_file": "The CA peers are checked against: servers then require client certificates (mTLS), clients verify servers.",
    "tls_require_client_cert": "With a CA: refuse clients without a certificate; `false` lets a scheduler's public clients use the token only.",
    "tls_server_name": "The name checked in servers' certificates when the address' host is not in them.",
    "tls_listen_plaintext": "Listen without TLS while channels to peers still present the certificate (`covel up`'s scheduler on loopback).",
    "health_port": "A plaintext port serving only gRPC health, for probes that cannot speak TLS (every service).",
    **{
        f"{service}_health_port": f"The same for the {service} only (wins over COVEL_HEALTH_PORT)."
        for service in ("registry", "hooks", "gateway", "store", "scheduler")
    },
    # shared: telemetry
    "traces_exporter": "`none`, `otlp` (OTEL_EXPORTER_OTLP_* say where) or `console`; several separated by commas.",
    "metrics_port": "Serve Prometheus `/metrics` on this port (every service); unset: off.",
    **{
        f"{service}_metrics_port": f"The same for the {service} only (wins over COVEL_METRICS_PORT)."
        for service in ("registry", "hooks", "gateway", "store", "scheduler")
    },
    "metrics_host": "Where `/metrics` listens; empty: the host of the service's gRPC address.",
    "log_level": "`debug`, `info`, `warning` or `error`.",
    "log_format": "`json` (one object a line) or `console` (for people).",
    "shutdown_grace_s": "Seconds in-flight calls get to finish after SIGTERM.",
    # registry
    "plugin_dirs": "Folders of plugin packages, separated by `:` or `,`, scanned in order (the first of two equal ids wins); folders not in COVEL_BUILTIN_PLUGIN_DIRS hold community plugins.",
    "pack_files": "Files of packs ([docs/worlds.md](worlds.md#plugin-policy-and-packs)), separated by `:` or `,`; the first of two packs with the same id wins.",
    "world_dirs": "Folders of world packages ([docs/worlds.md](worlds.md)), separated by `:` or `,`, scanned in order (the first of two equal ids wins).",
    "registry_cache_dir": "Where validation results of unchanged plugin packages are kept between starts (keyed by the hashes of their files and of the kernel's code); none: `registry-cache` in the data dir.",
    "builtin_plugin_dirs": "The operator's own folders among them: their packages are builtin (`kind: core` counts, code runs unapproved, InstallPackage cannot replace them); every other folder, and so every installed package, is community.",
    # scheduler: principals (docs/security.md, Principals and sessions)
    "api_users_file": "YAML or JSON `users: [{principal, token or token_sha256, roles}]`: one bearer token per person; roles `player` (default), `operator`.",
    "oidc_issuer": "Accept JWTs of this OIDC issuer (its `iss`), verified against its published keys (JWKS).",
    "oidc_audience": "The `aud` those JWTs must carry; required with COVEL_OIDC_ISSUER.",
    "oidc_jwks_url": "Where the issuer's keys are; empty: the `jwks_uri` of `<issuer>/.well-known/openid-configuration`.",
    "oidc_principal_claim": "The JWT claim that names the principal.",
    "oidc_roles_claim": "The JWT claim listing the principal's roles (`player`, `operator`; others ignored; none: `player`).",
    "oidc_algorithms": "JWT signature algorithms accepted, separated by commas; asymmetric ones only.",
    # scheduler
    "scheduler_instance_id": "Names this replica as the holder of turn leases and job claims.",
    "scheduler_lease_ttl_ms": "Turn lease lifetime, renewed every third of it while the turn runs; a crashed scheduler's sessions are playable again within it.",
    "scheduler_lease_wait_ms": "How long a submit to a busy session waits before `ABORTED`.",
    "scheduler_stall_resend_min_ms": "`ctx.gateway`: a silent first send is given up at half the time left, never sooner than this, then sent once more.",
    "scheduler_turn_timeout_s": "Upper bound of one turn, all runtimes included.",
    "scheduler_history_max_turns": "Player turns of history story runtimes read when the manifest sets none.",
    "scheduler_history_budget_chars": "History compaction: story log characters since the latest summary past which older turns are folded.",
    "scheduler_history_keep_turns": "History compaction: player turns kept unfolded.",
    "scheduler_max_auto_advance": "Turns a story yielding `continue` may start in a row (`framework.maxAutoAdvance` overrides; 0: off).",
    "instruction_locale": "`en` or `zh`: the language of every session's instructions (PLUGIN.md or PLUGIN.zh.md); empty: the session's locale.",
    "scheduler_detached_workers": "Detached jobs this replica runs at once (0: none here).",
    "scheduler_detached_poll_ms": "How often an idle detached worker asks the store's queue.",
    "scheduler_detached_lease_ttl_ms": "A detached job's lease, renewed while it runs.",
    "scheduler_drain_s": "SIGTERM: the whole shutdown (gateway:shutdown hooks, turns and jobs draining, last calls) fits in this.",
    # hooks
    "hooks_registry_wait_s": "How long the hooks service keeps retrying the registry at start.",
    "hooks_fault_threshold": "Hook faults of one plugin within the window that pause its hooks for the session.",
    "hooks_fault_window_s": "The fault breaker's window.",
    # gateway
    "gateway_config": "A YAML file of `providers:` and `slots:`.",
    "gateway_slots": "Per-slot overrides as JSON, e.g. `{\"story\": \"openai:gpt-4o\"}`.",
    "gateway_openai_base_url": "Shortcut for one OpenAI-compatible provider named `openai`: its base URL (`…/v1`).",
    "gateway_openai_model": "Its model; setting it makes `openai` the default slot.",
    "gateway_openai_api_key_env": "The environment variable holding its API key.",
    "gateway_openai_api_key_file": "A file holding its API key, read when that variable is empty.",
    "gateway_openai_embedding_model": "An embedding model of that provider: the `embedding` slot memory-search's vectors come "
                                      "from (unset with a real default slot: memory-search is BM25 alone).",
    "gateway_script": "A YAML file of per-slot reply queues and rules for the offline scripted model.",
    "gateway_scripted_chunk_delay_ms": "Delay between the scripted model's streamed chunks.",
    "gateway_max_attempts": "HTTP attempts of one logical call, retries and fallbacks together.",
    "gateway_call_budget_s": "Seconds one logical call may take, retries and fallbacks together.",
    "gateway_max_retries": "maxRetries when the request leaves it unset.",
    "gateway_attempts_per_model": "429/5xx answers one model gets before the next fallback is tried.",
    "gateway_retry_base_ms": "First retry delay (doubling, honouring `Retry-After`).",
    "gateway_retry_max_ms": "Longest retry delay.",
    "gateway_call_timeout_ms": "One attempt's time limit when the request sets none.",
    "gateway_first_token_timeout_ms": "A streamed attempt's wait for its first token; 0: derived from the budget.",
    "gateway_idle_timeout_ms": "A streamed attempt's longest silence between chunks.",
    "gateway_connect_timeout_ms": "Connecting to a provider.",
    # web
    "web_addr": "Where the player page and the HTTP/JSON API listen (`covel up` starts it there).",
    "web_call_timeout_s": "How long a unary call to the scheduler may take before the API answers 504.",
    "web_metrics_port": "Where the web front's /metrics listens (else `COVEL_METRICS_PORT`); unset: no metrics.",
    # store
    "data_dir": "Local data: the default SQLite database (and `covel up`'s logs).",
    "store_database_url": "SQLAlchemy URL; empty: SQLite at `<COVEL_DATA_DIR>/covel.db`. PostgreSQL: `postgresql+psycopg://user@host:5432/db`.",
    "store_database_schema": "PostgreSQL only: keep every table in this schema (created if missing).",
    "store_pool_size": "Database connections kept open (and threads running queries).",
    "store_lock_timeout_ms": "How long a write waits for another writer's lock before `UNAVAILABLE`.",
    "store_default_lease_ttl_ms": "Turn lease lifetime when a caller passes `ttl_ms = 0`.",
    "store_restart_lease_grace_ms": "At start, every turn lease is cut to end within this: a holder that died meanwhile blocks its session no longer.",
    "store_migrate": "`on-start`: the store migrates its database when it starts; `check`: it only checks the schema and refuses to start otherwise (Kubernetes migrates in the store's init container, `covel-service store-migrate`).",
    "store_readiness_interval_s": "How often the store checks its database answers; its health is NOT_SERVING (not ready) while it does not.",
    "store_detached_max_attempts": "Attempts of a detached job failing for passing reasons before it is parked.",
    "store_detached_retry_base_ms": "Backoff before a detached job's second attempt, doubling per attempt.",
    "store_detached_retry_max_ms": "Longest backoff between a detached job's attempts.",
    "store_detached_max_per_session": "Back-pressure: a session's turn waits (then `RESOURCE_EXHAUSTED`) while it has this many detached jobs queued or running.",
    "store_detached_max_total": "Back-pressure: every turn waits (then `RESOURCE_EXHAUSTED`) while the whole queue holds this many jobs.",
}


def settings_fields(service: str) -> dict[str, FieldInfo]:
    """The fields a service adds to the shared ones; for `shared`, in the order its bases declare them."""
    model = SETTINGS_MODELS[service]
    if service != "shared":
        return {name: info for name, info in model.model_fields.items() if name not in ServiceSettings.model_fields}
    declared = [name for cls in (*model.__bases__, model) for name in vars(cls).get("__annotations__", {})]
    return {name: model.model_fields[name] for name in declared if name in model.model_fields}


def env_names(model: type[BaseSettings], name: str, info: FieldInfo) -> list[str]:
    """The environment variables pydantic-settings reads for the field, upper-cased, first the preferred."""
    found = EnvSettingsSource(model)._extract_field_info(info, name)
    return list(dict.fromkeys(env_name.upper() for _, env_name, _ in found))


def setting_type(info: FieldInfo) -> str:
    tp = info.annotation
    args = [arg for arg in typing.get_args(tp) if arg is not type(None)] if typing.get_origin(tp) in (Union, types.UnionType) else [tp]
    base = args[0]
    origin = typing.get_origin(base)
    if origin is Literal:
        text = "one of " + "\\|".join(f"`{value}`" if value else "(empty)" for value in typing.get_args(base))
    elif origin is list:
        text = f"list of {SETTING_TYPES.get(typing.get_args(base)[0].__name__, 'string')}s"
    elif origin is dict:
        text = SETTING_TYPES["dict"]
    else:
        text = SETTING_TYPES.get(getattr(base, "__name__", ""), SCALARS.get(base, str(base)))
    return _constrained(text, list(info.metadata))


def setting_default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return FACTORY_DEFAULTS[info.default_factory.__name__]
    value = info.default
    if value is None:
        return "(unset)"
    if value == "":
        return "(empty)"
    return f"`{_literal(value)}`" if not isinstance(value, dict) else f"`{value or '{}'}`"


def settings_table(service: str) -> str:
    model = SETTINGS_MODELS[service]
    rows = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for name, info in settings_fields(service).items():
        if name not in SETTING_MEANINGS:
            raise MissingMeaning(f"{model.__name__}.{name}: add its meaning to SETTING_MEANINGS in covel_cli/doc_tables.py")
        variables = ", ".join(f"`{env}`" for env in env_names(model, name, info))
        rows.append(f"| {variables} | {setting_type(info)} | {setting_default(info)} | {SETTING_MEANINGS[name]} |")
    return "\n".join(rows) + "\n"


# ----- channels: deadlines and retries (shared/grpc_client.py) -------------------------------


def _deadline_cell(deadline: grpc_client.Deadline) -> str:
    if deadline.seconds is None:
        return f"none ({deadline.bounds})"
    return f"{deadline.seconds:g} s ({deadline.bounds})"


def _retry_cell(service: str, method: str, streamed: bool) -> str:
    if not grpc_client.retry_safe(service, method):
        return "no"
    if f"{service}/{method}" in grpc_client.IDEMPOTENT_WRITES:
        return f"yes: {grpc_client.IDEMPOTENT_WRITES[f'{service}/{method}']}"
    return "yes: a read (a stream only until its first message)" if streamed else "yes: a read"


def channel_rules_table() -> str:
    """Per target service: each method's deadline and whether a channel re-sends it on UNAVAILABLE."""
    parts = []
    for service in grpc_client.DEADLINES:
        rows = [f"**`{service}`**", "", "| method | deadline | re-sent on `UNAVAILABLE` |", "|---|---|---|"]
        for method_service, method, streamed in grpc_client.proto_methods():
            if method_service == service:
                deadline = _deadline_cell(grpc_client.deadline_of(service, method))
                rows.append(f"| `{method}` | {deadline} | {_retry_cell(service, method, streamed)} |")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


# ----- who may call what (shared/security/policy.py) ------------------------------------------


def service_policy_table() -> str:
    """Per service, its methods grouped by who may call them, and why."""
    rows = ["| service | methods | who may call them | why |", "|---|---|---|---|"]
    for service, methods in policy.POLICY.items():
        groups: dict[policy.Rule, list[str]] = {}
        for method, rule in methods.items():
            groups.setdefault(rule, []).append(method)
        for rule, names in groups.items():
            callers = ", ".join(f"`{caller}`" for caller in sorted(rule.callers))
            listed = "every method ([api.md](api.md))" if service == policy.CLIENT_API else ", ".join(f"`{name}`" for name in names)
            rows.append(f"| `{service.rsplit('.', 1)[1]}` | {listed} | {callers} | {rule.why} |")
    return "\n".join(rows) + "\n"


# ----- the public API's enums (protos/covel/scheduler/v1) ------------------------------------------


def public_enums_table() -> str:
    """Each enum of the public package, its values (UNSPECIFIED left out) and the fields that hold it."""
    files = (resources_pb2.DESCRIPTOR, scheduler_pb2.DESCRIPTOR)
    holders: dict[str, list[str]] = {}
    for file in files:
        for message in file.message_types_by_name.values():
            for field in message.fields:
                if field.enum_type is not None:
                    holders.setdefault(field.enum_type.name, []).append(f"`{message.name}.{field.name}`")
    rows = ["| enum | values | held by |", "|---|---|---|"]
    for enum in resources_pb2.DESCRIPTOR.enum_types_by_name.values():
        values = ", ".join(f"`{value.name}`" for value in enum.values if value.number)
        rows.append(f"| `{enum.name}` | {values} | {', '.join(holders.get(enum.name, []))} |")
    return "\n".join(rows) + "\n"


# ----- the docs --------------------------------------------------------------------------------


def generated(key: str) -> str:
    """The text of the block named `key`."""
    kind, _, name = key.partition(":")
    if kind == "manifest-fields" and name in manifest_models():
        return manifest_table(name)
    if kind == "settings" and name in SETTINGS_MODELS:
        return settings_table(name)
    if kind == "compiled-fields" and name in COMPILED_MODELS:
        return compiled_table(name)
    if key == "channel-rules":
        return channel_rules_table()
    if kind == "world-fields":
        from covel_cli.world_doc_tables import WORLD_MODELS, world_table

        if name in WORLD_MODELS:
            return world_table(name)
    if key == "service-policy":
        return service_policy_table()
    if key == "public-enums":
        return public_enums_table()
    if key == "hookspecs":
        from covel_cli.hookspec_doc_tables import hookspecs_table

        return hookspecs_table()
    raise KeyError(f"<!-- generated: {key} -->: no such table; use manifest-fields:<Model>, compiled-fields:<Model>, settings:<service>, "
                   "channel-rules, service-policy, public-enums or hookspecs")


def all_keys() -> list[str]:
    """Every table the docs must hold."""
    return ([f"manifest-fields:{name}" for name in manifest_models()] + [f"settings:{name}" for name in SETTINGS_MODELS]
            + [f"compiled-fields:{name}" for name in COMPILED_MODELS] + ["channel-rules", "service-policy", "public-enums", "hookspecs"])


def regenerate(text: str) -> str:
    return BLOCK.sub(lambda match: match.group(1) + generated(match.group("key")) + match.group(4), text)


def blocks_in(text: str) -> dict[str, str]:
    return {match.group("key"): match.group("body") for match in BLOCK.finditer(text)}


def stale_files() -> list[Path]:
    return [path for path in (*DOC_FILES, *WORLD_DOC_FILES) if path.exists() and regenerate(path.read_text(encoding="utf-8")) != path.read_text(encoding="utf-8")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m covel_cli.doc_tables", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the generated tables in place")
    args = parser.parse_args(argv)
    stale = stale_files()
    if args.write:
        for path in stale:
            path.write_text(regenerate(path.read_text(encoding="utf-8")), encoding="utf-8")
            print(f"updated {path.relative_to(REPO_ROOT)}")
        return 0
    for path in stale:
        print(f"{path.relative_to(REPO_ROOT)} is out of date: run {WRITE_COMMAND}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())

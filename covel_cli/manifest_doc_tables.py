"""docs/plugins.md's tables: the manifest fields authors write (services/registry/manifest_models.py,
`manifest-fields:<Model>`) with their meanings and defaults, and the compiled manifests the registry
serves (shared/manifest, `compiled-fields:<Model>`). Meanings live here rather than as
Field(description=…) on the models; every field must have one, so a new field fails the test.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel
from pydantic.fields import FieldInfo

from covel_cli.table_cells import SCALARS, MissingMeaning, constrained, literal
from services.registry import manifest_fields, runtime_defaults, world_models
from services.registry import manifest_models as manifest
from shared.manifest import CompiledManifest, PackageDefinition
from shared.manifest.runtime import FUNCTION_SLOT_WHEN_UNWRITTEN

# ----- manifest fields -------------------------------------------------------------------------

ROOT_MODEL = manifest.PluginManifest
# Fields whose named validator says more than their base type.
VALIDATED_TYPES: dict[Callable[..., Any], str] = {
    manifest_fields._contract_id: "contract id (`name@N`)",
    manifest_fields._hook_event: "hook event name",
    manifest_fields._action_name: "action name",
    manifest_fields._https_link: "https URL",
    world_models._item_id: "id (letters, digits, `.`, `_`, `-`)",
    world_models._plugin_id: "plugin id",
    world_models._contract_target: "`contract:<id>`",
}


def _loop_limit(index: int) -> str:
    story, system = runtime_defaults.LOOP_LIMITS["story"][index], runtime_defaults.LOOP_LIMITS["system"][index]
    return f"`{story}` (story), `{system}` (system)"


def _profile_default(key: str) -> str:
    return ", ".join(f"`{literal(values[key])}` ({profile})" for profile, values in runtime_defaults.LOOP_PROFILES.items())


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
    "DetachedOptions.maxSettleWaitMs": f"`{runtime_defaults.DEFAULT_SETTLE_WAIT_MS}`",
    "InputBinding.scope": "`turn`",
    "InputBinding.required": "`true`",
    "SelfData.format": f"`{runtime_defaults.DEFAULT_SELF_DATA_FORMAT}`",
    "SelfData.maxEntries": f"`{runtime_defaults.DEFAULT_SELF_DATA_MAX_ENTRIES}`",
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
    "Loop.idleTimeoutMs": f"`{runtime_defaults.DEFAULT_IDLE_TIMEOUT_MS}`",
    "Loop.loopDetection": f"`{runtime_defaults.DEFAULT_LOOP_DETECTION}`",
    "Loop.maxRecursionDepth": f"`{runtime_defaults.DEFAULT_MAX_RECURSION_DEPTH}`",
    "Loop.maxSteps": f"`{runtime_defaults.DEFAULT_MAX_STEPS}`",
    "Loop.stream": _profile_default("stream"),
    "Loop.steering": _profile_default("steering"),
    "Loop.truncation": _profile_default("truncation"),
    "Loop.fallback": _profile_default("fallback"),
    "Loop.finalizer": "`{maxSteps: true, deadlineReserveMs: 0}`",
    "Finalizer.maxSteps": "`true`",
    "Finalizer.deadlineReserveMs": "`0`",
    **{f"Corrections.{name}": f"`{value}`" for name, value in runtime_defaults.DEFAULT_CORRECTIONS.items()},
    "Function.handler": f"`{runtime_defaults.DEFAULT_HANDLER}`",
    "Function.model": f"`{FUNCTION_SLOT_WHEN_UNWRITTEN}`",
    "Function.timeoutMs": f"`{runtime_defaults.DEFAULT_FUNCTION_TIMEOUT_MS}`",
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
    "Effects.reads": "Resources the runtime reads, by the author's names (recorded in the compiled manifest).",
    "Effects.writes": "Resources the runtime writes, by the author's names (recorded in the compiled manifest).",
    "Effects.parallelSafe": "`false`: the runtime runs alone, after the others of its layer in the stage graph, never beside one.",
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
    "RuntimeDecl.effects": "What the runtime reads and writes, and whether it may run beside others (`parallelSafe`).",
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
    "DetachedOptions.settle": "The player's next action waits for the job to finish (at most `maxSettleWaitMs`).",
    "DetachedOptions.maxSettleWaitMs": "How long the player's next action waits for a `settle` job, from when it arrives.",
    "DetachedOptions.maxQueueMs": "A job still queued after this is timed out (store default 600000).",
    "DetachedOptions.coalesce": "A new job of this runtime supersedes its jobs of the session still queued (status `superseded`): for a runtime that only needs the latest turn, not every one.",
    "DetachedOptions.maxExecutionMs": "A job still running after this is timed out (store default 300000).",
    "IO.inputs": "Named input bindings; a handler reads `ctx.inputs[name][\"value\"]`, an agent `<runtime-inputs>`.",
    "IO.selfData": "The runtime's own plugin data shown in its prompt, one row per key.",
    "IO.payloadSchema": "The schema a manual runtime's payload must fit (a file, `contract:<id>` or an inline schema): `RunManual` refuses others (`PAYLOAD_INVALID`), `ctx.recursive_call` raises.",
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
    "Contributes.worldProjections": "World projections; each `handler` must be a module in the package. Never called: a warning at load (`world-projections-unsupported`).",
    "Contributes.prompt": "Static prompt segments.",
    "Contributes.wires": "Covel provider wires; this kernel serves none: a warning at load (`wires-unsupported`), and `covel.register_wires` registers nothing.",
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
        return constrained(author_type(base), constraints)
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


def manifest_table(name: str) -> str:
    model, paths = manifest_models()[name]
    hints = typing.get_type_hints(model, include_extras=True)
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for field_name, info in model.model_fields.items():
        key = f"{name}.{info.alias or field_name}"
        if key not in MANIFEST_MEANINGS:
            raise MissingMeaning(f"{key}: add its meaning to MANIFEST_MEANINGS in covel_cli/manifest_doc_tables.py")
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
        return literal(values[0]) if len(values) == 1 else "one of " + "\\|".join(literal(value) for value in values)
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

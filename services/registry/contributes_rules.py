"""Cross-field rules of the root manifest: contributes lists, conflicts, and what runtimes
may refer to (declared tools, story packages without hard plugin requirements)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.registry.code_paths import resolve_code_file
from services.registry.dataset_rules import FRAMEWORK_TOOLS
from services.registry.diagnostics import DiagnosticBag
from services.registry.manifest_fields import KERNEL_EXTENSION_POINTS
from services.registry.manifest_models import EventDecl, PluginManifest, SettingDecl
from services.registry.package_files import PackageFiles
from services.registry.runtime_compiler import CompiledRuntime
from shared.plugin_settings import KNOWN_TYPES as KNOWN_SETTING_TYPES
from shared.plugin_settings import value_problem as setting_value_problem

RESERVED_PROMPT_ID = "static-prompt"


def event_topics(manifest: PluginManifest) -> list[str]:
    events = manifest.contributes.events if manifest.contributes else None
    return [item.topic if isinstance(item, EventDecl) else item for item in events or []]


def _no_duplicates(items: Sequence[str], path: str, what: str, bag: DiagnosticBag, file: str) -> None:
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        if item in seen:
            bag.error(
                f"duplicate-{what}",
                f"`{item}` is declared twice (also at {path}[{seen[item]}])",
                file=file,
                field_path=f"{path}[{index}]",
            )
        seen.setdefault(item, index)


def check_contributes(manifest: PluginManifest, bag: DiagnosticBag, *, file: str) -> None:
    for index, contract in enumerate(manifest.conflicts or []):
        if contract in KERNEL_EXTENSION_POINTS:
            bag.error(
                "invalid-conflict",
                f"{contract} is a kernel extension point; conflicts names plugin contracts only",
                file=file,
                field_path=f"conflicts[{index}]",
                hint="how providers of an extension point combine is decided by its mode; remove it",
            )
    contributes = manifest.contributes
    if contributes is None:
        return
    tools = list(contributes.tools or [])
    _no_duplicates(tools, "contributes.tools", "tool", bag, file)
    for index, tool in enumerate(tools):
        if tool in FRAMEWORK_TOOLS:
            bag.error(
                "reserved-tool-name",
                f"`{tool}` is a framework tool; a plugin cannot register a tool with this name",
                file=file,
                field_path=f"contributes.tools[{index}]",
            )
    actions = list(contributes.actions or [])
    _no_duplicates(actions, "contributes.actions", "action", bag, file)
    _no_duplicates(list(contributes.forms or []), "contributes.forms", "form", bag, file)
    _no_duplicates(event_topics(manifest), "contributes.events", "event-topic", bag, file)
    prompt_ids = [segment.id for segment in contributes.prompt or []]
    _no_duplicates(prompt_ids, "contributes.prompt", "prompt-id", bag, file)
    for index, segment_id in enumerate(prompt_ids):
        if segment_id == RESERVED_PROMPT_ID:
            bag.error(
                "reserved-prompt-id",
                f"`{RESERVED_PROMPT_ID}` is the id the host registers static segments under; pick another id",
                file=file,
                field_path=f"contributes.prompt[{index}].id",
            )
    for namespace, decl in (contributes.data or {}).items():
        if decl.authoring is not None and not decl.accepts:
            bag.error(
                "authoring-without-accepts",
                "only a namespace that accepts a contract (lists `accepts`) can declare authoring",
                file=file,
                field_path=f"contributes.data.{namespace}.authoring",
                hint="add `accepts: [<contract>]`, or remove authoring",
            )
        _check_reference_within((decl.authoring or {}).get("references"), namespace, bag, file)
    _check_settings(contributes.settings or [], bag, file)
    for index, command in enumerate(contributes.commands or []):
        action = command.get("action")
        if isinstance(action, str) and action not in actions:
            bag.error(
                "command-action-undeclared",
                f"command action `{action}` is not listed in contributes.actions",
                file=file,
                field_path=f"contributes.commands[{index}].action",
                hint=f"add `{action}` to contributes.actions",
            )


def _check_settings(settings: Sequence[SettingDecl], bag: DiagnosticBag, file: str) -> None:
    """contributes.settings: each key once, a known type, options for a select, min <= max, and a
    default that passes the declaration's own rules (the player's values are checked by them)."""
    first: dict[str, int] = {}
    for index, setting in enumerate(settings):
        path = f"contributes.settings[{index}]"
        if setting.key in first:
            bag.error("duplicate-setting", f"`{setting.key}` is declared twice (also at contributes.settings[{first[setting.key]}])",
                      file=file, field_path=path)
            continue
        first[setting.key] = index
        if setting.type not in KNOWN_SETTING_TYPES:
            bag.warning(
                "unknown-setting-type", f"setting `{setting.key}` has type `{setting.type}`; the host does not check its values",
                file=file, field_path=f"{path}.type", hint=f"use one of {', '.join(sorted(KNOWN_SETTING_TYPES))}",
            )
            continue
        if setting.type == "select" and not setting.options:
            bag.error("invalid-setting", f"select setting `{setting.key}` lists no options", file=file,
                      field_path=f"{path}.options", hint="list the values the player can pick")
            continue
        if setting.min is not None and setting.max is not None and setting.min > setting.max:
            bag.error("invalid-setting", f"setting `{setting.key}` has min {setting.min:g} above max {setting.max:g}", file=file,
                      field_path=f"{path}.min", hint="swap them")
            continue
        if setting.default is not None:
            problem = setting_value_problem(setting.model_dump(), setting.default).split(";")[0]
            if problem:
                bag.error("invalid-setting", f"the default of setting `{setting.key}` {problem}", file=file,
                          field_path=f"{path}.default", hint="make the default a value a player could choose, or remove it")


def check_runtime_tools(runtime: CompiledRuntime, contributed_tools: Sequence[str], bag: DiagnosticBag) -> None:
    """agent.tools.plugin names tools of contributes.tools; finishWith names a tool the agent has."""
    agent = runtime.manifest.get("agent")
    if not agent:
        return
    prefix = "runtime." if runtime.file == "PLUGIN.md" else ""
    declared = set(contributed_tools)
    for index, tool in enumerate(agent["tools"]["plugin"]):
        # suspend is the kernel's tool an agent opts into (docs/plugins.md#suspend-and-resume).
        if tool not in declared and tool != "suspend":
            bag.error(
                "undeclared-tool",
                f"agent.tools.plugin names `{tool}`, which contributes.tools does not declare",
                file=runtime.file,
                field_path=f"{prefix}agent.tools.plugin[{index}]",
                hint=f"add `{tool}` to contributes.tools in PLUGIN.md",
            )
    finish = agent.get("finishWith")
    after_tools = (agent.get("completion") or {}).get("afterTools") or []
    available = set(agent["tools"]["plugin"]) | {
        f"{item['dataset']}-{tool}" for item in agent["tools"]["datasets"] for tool in item.get("tools") or []
    }
    imported = {item.get("as") or item["contract"] for item in agent["tools"]["services"]}
    hint = "list the tool in agent.tools.plugin (and contributes.tools)"
    service = "is an imported service tool; a runtime cannot depend on another plugin to finish"
    # finishWith compiles into completion.afterTools: [it]; either way every completion tool must be the agent's own.
    if finish:
        path = f"{prefix}agent.finishWith"
        if finish in imported:
            bag.error("finish-with-service-tool", f"`{finish}` {service}", file=runtime.file, field_path=path)
        elif finish not in available and finish not in FRAMEWORK_TOOLS:
            bag.error("finish-with-unknown-tool", f"finishWith names `{finish}`, which is not one of this agent's tools",
                      file=runtime.file, field_path=path, hint=hint)
        return
    for index, tool in enumerate(after_tools):
        path = f"{prefix}agent.completion.afterTools[{index}]"
        if tool in imported:
            bag.error("after-tools-service-tool", f"`{tool}` {service}", file=runtime.file, field_path=path)
        elif tool not in available and tool not in FRAMEWORK_TOOLS:
            bag.error("after-tools-unknown-tool", f"completion.afterTools names `{tool}`, which is not one of this agent's tools",
                      file=runtime.file, field_path=path, hint=hint)


def check_story_requires(manifest: PluginManifest, runtimes: Sequence[CompiledRuntime], bag: DiagnosticBag, *, file: str) -> None:
    """A package with a story runtime cannot require plugin contracts (a missing provider would switch it off)."""
    story = next((runtime for runtime in runtimes if runtime.visibility == "story"), None)
    if story is None:
        return
    for index, contract in enumerate(manifest.requires or []):
        if contract in KERNEL_EXTENSION_POINTS:
            continue
        bag.error(
            "story-requires-plugin-contract",
            f"this package has a story runtime ({story.runtime_id}); its root `requires` cannot list the plugin contract {contract}",
            file=file,
            field_path=f"requires[{index}]",
            hint="remove it and read the contract through an optional input (required: false)",
        )


def check_unserved(contributes: Any, bag: DiagnosticBag, *, file: str) -> None:
    """What a Covel package declares that this kernel has no endpoint for: refused at load with a warning (the rest of
    the package loads and runs). docs/plugins.md "Porting a Covel JavaScript package" says which and why."""
    if contributes is None:
        return
    if contributes.wires:
        bag.warning("wires-unsupported", "this kernel serves no plugin model wires: model calls go to the gateway's own providers "
                    "(the operator's COVEL_GATEWAY_* settings); the wires are not registered", file=file, field_path="contributes.wires",
                    hint="remove contributes.wires; the player picks models through the gateway's slots")
    if contributes.worldProjections:
        bag.warning("world-projections-unsupported", "this kernel does not call world projection handlers: a world's data reaches "
                    "plugins by the data sources' `to: contract:<id>` (docs/worlds.md); the handlers are checked, never run",
                    file=file, field_path="contributes.worldProjections",
                    hint="accept the contract in contributes.data and let the world's data sources fill the namespace")


def check_projection_handlers(projections: Any, files: PackageFiles, bag: DiagnosticBag, *, file: str) -> None:
    """Each contributes.worldProjections item's `handler` is a module in the package (spec: referenced
    entry, handler and guard files must be in the package)."""
    items = projections.items() if isinstance(projections, dict) else enumerate(projections or [])
    for key, item in items:
        written = item.get("handler") if isinstance(item, dict) else None
        if not isinstance(written, str):
            continue
        path = f"contributes.worldProjections.{key}.handler" if isinstance(key, str) else f"contributes.worldProjections[{key}].handler"
        relative = files.relative(file, written)
        if relative is None:
            bag.error("file-outside-package", f"the projection handler `{written}` points outside the package",
                      file=file, field_path=path, hint="write a path inside the package, e.g. ./projections/x.py")
            continue
        relative = resolve_code_file(relative, files.is_file, bag, written=written, file=file, field_path=path)
        if not files.is_file(relative):
            bag.error("file-missing", f"the projection handler `{written}` does not exist (looked for {relative})",
                      file=file, field_path=path, hint=f"add {relative} to the package, or fix the path")


def _check_reference_within(references: Any, namespace: str, bag: DiagnosticBag, file: str) -> None:
    """A reference with `values` checks its candidates against the place one `within` field names: at most one."""
    for index, reference in enumerate(references if isinstance(references, list) else []):
        if not isinstance(reference, dict):
            continue
        within = reference.get("within")
        if reference.get("values") and isinstance(within, list) and len(within) > 1:
            bag.error(
                "reference-within-ambiguous",
                f"a reference with `values` checks them against one place; `within` names {len(within)} fields",
                file=file,
                field_path=f"contributes.data.{namespace}.authoring.references[{index}].within",
                hint="keep the one field that holds the place the values are checked against",
            )

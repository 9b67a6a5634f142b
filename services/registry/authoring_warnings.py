"""Validation-only advice: fields written with their default or derived value, and longer forms
that have a shorter one. The package still passes; these are warnings of `covel validate-plugin`
(and the ValidatePackage RPC), not of the catalogue's load.
"""

from __future__ import annotations

from typing import Any

from services.registry.diagnostics import DiagnosticBag
from services.registry.runtime_compiler import CompiledRuntime
from services.registry.runtime_defaults import (
    DEFAULT_CORRECTIONS,
    DEFAULT_HANDLER,
    DEFAULT_IDLE_TIMEOUT_MS,
    DEFAULT_LOOP_DETECTION,
    DEFAULT_MAX_RECURSION_DEPTH,
    DEFAULT_SELF_DATA_FORMAT,
    DEFAULT_SELF_DATA_MAX_ENTRIES,
    LOOP_LIMITS,
    LOOP_PROFILES,
)

DEFAULT_CODE = "default-value"
DERIVED_CODE = "derived-value"
SHORTER_CODE = "shorter-form"
# The default written out, in Python or as Covel's JavaScript path (which loads the .py here).
DEFAULT_HANDLER_SPELLINGS = (DEFAULT_HANDLER, "handler.py", "./handler.js", "handler.js")
DEFAULT_ENTRY_SPELLINGS = ("server/index.py", "./server/index.py", "server/index.js", "./server/index.js")


def _same(written: Any, default: Any) -> bool:
    return type(written) is type(default) and written == default


class _Advisor:
    def __init__(self, bag: DiagnosticBag, file: str, prefix: str) -> None:
        self.bag = bag
        self.file = file
        self.prefix = prefix

    def path(self, relative: str) -> str:
        return f"{self.prefix}.{relative}" if self.prefix else relative

    def default(self, container: Any, key: str, default: Any, relative: str) -> None:
        if isinstance(container, dict) and key in container and _same(container[key], default):
            self.bag.warning(
                DEFAULT_CODE,
                f"`{key}: {_show(default)}` is the default value; remove it",
                file=self.file,
                field_path=self.path(relative),
            )

    def derived(self, container: Any, key: str, value: Any, source: str, relative: str) -> None:
        if isinstance(container, dict) and key in container and _same(container[key], value):
            self.bag.warning(
                DERIVED_CODE,
                f"`{key}: {_show(value)}` is worked out from {source}; remove it",
                file=self.file,
                field_path=self.path(relative),
            )

    def shorter(self, relative: str, message: str, hint: str) -> None:
        self.bag.warning(SHORTER_CODE, f"{message}: it means the same", file=self.file, field_path=self.path(relative), hint=hint)


def _mapping(value: Any) -> dict[str, Any]:
    """`value` if the author wrote a mapping there, else an empty one (raw YAML: anything can be anywhere)."""
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[Any]:
    """`value` if the author wrote a list there, else an empty one."""
    return value if isinstance(value, list) else []


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def runtime_warnings(raw: Any, runtime: CompiledRuntime, bag: DiagnosticBag, *, prefix: str) -> None:
    if not isinstance(raw, dict):
        return
    advisor = _Advisor(bag, runtime.file, prefix)
    visibility = runtime.visibility
    schedule = _mapping(raw.get("schedule"))
    trigger = _mapping(schedule.get("trigger"))
    if not schedule.get("subagentOnly"):
        advisor.default(trigger, "type", "auto", "schedule.trigger.type")
    advisor.default(schedule, "every", 1, "schedule.every")
    advisor.default(schedule, "detached", False, "schedule.detached")
    advisor.default(schedule, "background", False, "schedule.background")
    advisor.default(schedule, "subagentOnly", False, "schedule.subagentOnly")
    if isinstance(schedule.get("detached"), dict):
        advisor.default(schedule["detached"], "settle", False, "schedule.detached.settle")
    for group in ("needs", "after"):
        for index, item in enumerate(schedule.get(group) or []):
            advisor.default(item, "cardinality", "one", f"schedule.{group}[{index}].cardinality")
    io = _mapping(raw.get("io"))
    advisor.default(io, "visibility", "system", "io.visibility")
    advisor.default(io, "concealed", False, "io.concealed")
    for binding, spec in _mapping(io.get("inputs")).items():
        if not isinstance(spec, dict):
            continue
        advisor.default(spec.get("from"), "cardinality", "one", f"io.inputs.{binding}.from.cardinality")
        advisor.default(spec, "required", True, f"io.inputs.{binding}.required")
        advisor.default(spec, "scope", "turn", f"io.inputs.{binding}.scope")
    for index, item in enumerate(io.get("selfData") or []):
        advisor.default(item, "format", DEFAULT_SELF_DATA_FORMAT, f"io.selfData[{index}].format")
        advisor.default(item, "maxEntries", DEFAULT_SELF_DATA_MAX_ENTRIES, f"io.selfData[{index}].maxEntries")
    advisor.derived(raw, "type", runtime.type, "the `function` block being there or not", "type")
    function = raw.get("function")
    if isinstance(function, dict):
        for written in DEFAULT_HANDLER_SPELLINGS:
            advisor.derived(function, "handler", written, "the manifest's folder (./handler.py)", "function.handler")
    agent = raw.get("agent")
    if isinstance(agent, dict):
        _agent_warnings(advisor, agent, runtime, visibility)


def _agent_warnings(advisor: _Advisor, agent: dict[str, Any], runtime: CompiledRuntime, visibility: str) -> None:
    advisor.default(agent, "model", "story" if visibility == "story" else "plugin", "agent.model")
    advisor.default(agent, "reasoning", True, "agent.reasoning")
    if agent.get("finishWith"):
        advisor.default(agent, "toolChoice", "required", "agent.toolChoice")
    completion = agent.get("completion")
    if (
        isinstance(completion, dict)
        and set(completion) == {"require", "afterTools"}
        and completion["require"] == "tool-use"
        and isinstance(completion["afterTools"], list)
        and len(completion["afterTools"]) == 1
        and agent.get("toolChoice") == "required"
        and not agent.get("finishWith")
    ):
        tool = completion["afterTools"][0]
        advisor.shorter(
            "agent.completion",
            f"completion: {{require: tool-use, afterTools: [{tool}]}} with toolChoice: required",
            f"write `finishWith: {tool}` and remove completion and toolChoice",
        )
    loop = agent.get("loop")
    if not isinstance(loop, dict):
        return
    compiled_loop = runtime.manifest["agent"]["loop"]
    subagent = runtime.manifest["schedule"]["subagentOnly"]
    default_profile = "actor" if subagent else ("story" if visibility == "story" else "system")
    advisor.default(loop, "profile", default_profile, "agent.loop.profile")
    timeout, call_timeout, retries = LOOP_LIMITS["story" if visibility == "story" else "system"]
    advisor.default(loop, "timeoutMs", timeout, "agent.loop.timeoutMs")
    advisor.default(loop, "callTimeoutMs", call_timeout, "agent.loop.callTimeoutMs")
    advisor.default(loop, "maxRetries", retries, "agent.loop.maxRetries")
    advisor.default(loop, "idleTimeoutMs", DEFAULT_IDLE_TIMEOUT_MS, "agent.loop.idleTimeoutMs")
    advisor.default(loop, "loopDetection", DEFAULT_LOOP_DETECTION, "agent.loop.loopDetection")
    advisor.default(loop, "maxRecursionDepth", DEFAULT_MAX_RECURSION_DEPTH, "agent.loop.maxRecursionDepth")
    for key, value in LOOP_PROFILES[compiled_loop["profile"]].items():
        advisor.default(loop, key, value, f"agent.loop.{key}")
    finalizer = loop.get("finalizer")
    advisor.default(loop, "finalizer", True, "agent.loop.finalizer")
    if isinstance(finalizer, dict):
        advisor.default(finalizer, "maxSteps", True, "agent.loop.finalizer.maxSteps")
        advisor.default(finalizer, "deadlineReserveMs", 0, "agent.loop.finalizer.deadlineReserveMs")
    corrections = loop.get("corrections")
    if isinstance(corrections, dict):
        for key, value in DEFAULT_CORRECTIONS.items():
            advisor.default(corrections, key, value, f"agent.loop.corrections.{key}")


def root_warnings(
    raw: dict[str, Any],
    *,
    folder_name: str,
    default_entry_exists: bool,
    output_contracts: set[str],
    has_setup_runtime: bool,
    has_entry: bool,
    derived_tags: list[str],
    bag: DiagnosticBag,
    file: str,
) -> None:
    advisor = _Advisor(bag, file, "")
    for index, tag in enumerate(_items(raw.get("tags"))):
        if tag in derived_tags and isinstance(tag, str) and tag.startswith(("cost:", "ui:")):
            advisor.derived({"tags": tag}, "tags", tag, "the package's runtimes and contributes", f"tags[{index}]")
    advisor.derived(raw, "id", folder_name, "the package folder's name", "id")
    advisor.default(raw, "kind", "plugin", "kind")
    if default_entry_exists:
        for written in DEFAULT_ENTRY_SPELLINGS:
            advisor.derived(raw, "entry", written, "server/index.py being present", "entry")
    for index, item in enumerate(_items(raw.get("provides"))):
        if isinstance(item, str) and item in output_contracts:
            advisor.derived(
                {"provides": item}, "provides", item, "the io.output.contract of a runtime", f"provides[{index}]"
            )
    if "version" not in raw and (has_entry or has_setup_runtime):
        bag.warning(
            "version-missing",
            "a package with an entry module or a setup runtime should write `version`: setup runtimes rerun when it changes",
            file=file,
            field_path="version",
            hint="add e.g. `version: 0.1.0`",
        )
    _contributes_warnings(_mapping(raw.get("contributes")), advisor)


def _contributes_warnings(contributes: dict[str, Any], advisor: _Advisor) -> None:
    for index, hook in enumerate(_items(contributes.get("hooks"))):
        if not isinstance(hook, dict):
            continue
        advisor.default(hook, "enforce", "normal", f"contributes.hooks[{index}].enforce")
        if set(hook) == {"event"} or (set(hook) == {"event", "enforce"} and hook.get("enforce") == "normal"):
            advisor.shorter(f"contributes.hooks[{index}]", f"{{event: {hook.get('event')}}}", f"write `- {hook.get('event')}`")
    for index, extension in enumerate(_items(contributes.get("extensions"))):
        if not isinstance(extension, dict):
            continue
        advisor.default(extension, "order", 0, f"contributes.extensions[{index}].order")
        if set(extension) == {"point", "id"} or (set(extension) == {"point", "id", "order"} and extension.get("order") == 0):
            short = f"{extension.get('point')}/{extension.get('id')}"
            advisor.shorter(f"contributes.extensions[{index}]", f"{{point, id}} of {short}", f"write `- {short}`")
    for index, service in enumerate(_items(contributes.get("services"))):
        if isinstance(service, dict):
            advisor.default(service, "access", "read", f"contributes.services[{index}].access")
            advisor.default(service, "modelFacing", False, f"contributes.services[{index}].modelFacing")
    data = _mapping(contributes.get("data"))
    for namespace, decl in data.items():
        advisor.default(decl, "version", 1, f"contributes.data.{namespace}.version")
    for index, segment in enumerate(_items(contributes.get("prompt"))):
        advisor.default(segment, "role", "system", f"contributes.prompt[{index}].role")

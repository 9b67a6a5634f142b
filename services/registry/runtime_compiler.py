"""Compile one author-written runtime into the manifest the scheduler executes.

The compiled manifest keeps the spec's field names (camelCase) and has every default of the
spec's tables filled in, so the scheduler never re-derives one: this module is the one place
those defaults are decided. Its shape is shared/manifest's CompiledManifest, which the package
loader checks it against before the registry serves it. Cross-field rules of a single runtime
are checked here; rules that span runtimes live in package_loader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.registry.agent_compiler import compile_agent, compile_function
from services.registry.compile_scope import CompileScope, RuntimeSource
from services.registry.diagnostics import DiagnosticBag
from services.registry.runtime_defaults import (
    DEFAULT_FUNCTION_TIMEOUT_MS,
    DEFAULT_SELF_DATA_FORMAT,
    DEFAULT_SELF_DATA_MAX_ENTRIES,
    DEFAULT_SETTLE_WAIT_MS,
    KERNEL_INPUT_OPTIONS,
    KERNEL_INPUTS,
)
from services.registry.runtime_models import (
    DependencyRef,
    DetachedOptions,
    InputBinding,
    RuntimeDecl,
)
from shared.manifest import CompiledManifest


def json_pointer_problem(pointer: str) -> str | None:
    """Why `pointer` is not an RFC 6901 JSON Pointer, or None."""
    if pointer == "":
        return None
    if not pointer.startswith("/"):
        return "a JSON Pointer is empty or starts with `/`"
    for token in pointer[1:].split("/"):
        index = 0
        while (index := token.find("~", index)) != -1:
            if token[index + 1 : index + 2] not in ("0", "1"):
                return "`~` must be escaped as `~0` (and `/` as `~1`)"
            index += 2
    return None

@dataclass
class CompiledRuntime:
    runtime_id: str
    plugin_id: str
    type: str
    stage: str
    visibility: str
    file: str
    manifest: dict[str, Any]
    prompt: str = ""
    prompt_variants: dict[str, str] = field(default_factory=dict)
    # `manifest` checked against the shared model (package_loader), what the registry serves.
    compiled: CompiledManifest | None = None

    @property
    def output_contract(self) -> str | None:
        contract = self.manifest["io"]["output"].get("contract")
        return str(contract) if contract else None

    @property
    def trigger_type(self) -> str:
        return str(self.manifest["schedule"]["trigger"]["type"])

class _Compiler(CompileScope):
    # -- groups
    def compile(self) -> dict[str, Any]:
        decl = self.decl
        is_function = decl.function is not None
        if is_function and decl.agent is not None:
            self.error(
                "agent-and-function",
                "a runtime is a function (it has a `function` block) or an agent, not both",
                "agent",
                hint="remove the `agent` block, or the `function` block",
            )
        if decl.type is not None and decl.type != ("function" if is_function else "agent"):
            self.error(
                "runtime-type-mismatch",
                f"`type: {decl.type}` contradicts the runtime: a runtime with a `function` block is a function, one without is an agent",
                "type",
                hint="remove `type` (it is worked out from the `function` block)",
            )
        io = self.compile_io()
        visibility = io["visibility"]
        schedule = self.compile_schedule(visibility)
        manifest: dict[str, Any] = {
            "id": self.source.runtime_id,
            "pluginId": self.source.plugin_id,
            "type": "function" if is_function else "agent",
            "file": self.source.file,
            "version": self.source.plugin_version,
            "schedule": schedule,
            "io": io,
        }
        if is_function:
            manifest["function"] = compile_function(self)
        else:
            manifest["agent"] = compile_agent(self, visibility, subagent_only=schedule["subagentOnly"])
        if decl.guard is not None:
            guard = self.code_file(decl.guard, "guard")
            if guard is None:
                self.error("guard-outside-package", f"the guard `{decl.guard}` is outside the package", "guard")
            elif not self.existing_file(guard):
                self.error("guard-missing", f"the guard module `{decl.guard}` does not exist (looked for {guard})", "guard")
            else:
                manifest["guard"] = guard
                written_limit = decl.function.timeoutMs if decl.function else None
                manifest["guardTimeoutMs"] = written_limit or DEFAULT_FUNCTION_TIMEOUT_MS
        if decl.effects is not None:
            manifest["effects"] = decl.effects.model_dump(exclude_none=True)
        if decl.permissions is not None:
            manifest["permissions"] = decl.permissions.model_dump(by_alias=True, exclude_none=True)
        return manifest

    def compile_schedule(self, visibility: str) -> dict[str, Any]:
        written = self.decl.schedule
        schedule = written.model_dump(by_alias=True, exclude_none=True) if written else {}
        trigger = dict(schedule.get("trigger") or {})
        subagent_only = bool(schedule.get("subagentOnly", False))
        if subagent_only:
            self._check_subagent_only(schedule, trigger, visibility)
            trigger["type"] = "manual"
        trigger.setdefault("type", "auto")
        stage = schedule.get("stage")
        self._check_stage(schedule, trigger, stage)
        detached = self._compile_detached(written.detached if written else None, stage, visibility)
        background = bool(schedule.get("background", False))
        self._check_background_and_detached(trigger, background=background, detached=bool(detached))
        return {
            **({"stage": stage} if stage else {}),
            "every": schedule.get("every", 1),
            "trigger": trigger,
            "needs": self.dependencies("needs"),
            "after": self.dependencies("after"),
            "detached": detached,
            "background": background,
            "subagentOnly": subagent_only,
        }

    def _check_subagent_only(self, schedule: dict[str, Any], trigger: dict[str, Any], visibility: str) -> None:
        """A subagentOnly runtime is a manual agent the kernel never schedules: nothing about its scheduling may be written."""
        if trigger.get("type") not in (None, "manual"):
            self.error("subagent-trigger", "a subagentOnly runtime is triggered manually; remove `type`", "schedule.trigger.type")
        if visibility == "story":
            self.error("subagent-story", "a subagentOnly runtime cannot have io.visibility: story", "schedule.subagentOnly")
        if self.decl.function is not None:
            self.error("subagent-function", "a subagentOnly runtime must be an agent", "schedule.subagentOnly")
        for banned in ("stage", "needs", "after", "background"):
            if banned in schedule:
                self.error("subagent-field", f"a subagentOnly runtime cannot write schedule.{banned}", f"schedule.{banned}")
        if self.decl.guard is not None:
            self.error("subagent-field", "a subagentOnly runtime cannot have a guard", "guard")
        if self.decl.io and self.decl.io.output and self.decl.io.output.recordAs is not None:
            self.error("subagent-field", "a subagentOnly runtime cannot write io.output.recordAs", "io.output.recordAs")

    def _check_stage(self, schedule: dict[str, Any], trigger: dict[str, Any], stage: str | None) -> None:
        """An auto runtime has a stage, no other trigger has one (or `every`); a setup runtime repeats nothing."""
        if trigger["type"] == "auto":
            if stage is None:
                self.drop(
                    "stage-missing",
                    "an auto runtime must declare schedule.stage (setup, pre-turn, narrative, post-turn or audit)",
                    "schedule.stage",
                )
        else:
            if stage is not None:
                self.error("stage-not-allowed", f"a {trigger['type']} runtime has no stage", "schedule.stage")
            if "every" in schedule:
                self.error("every-not-allowed", f"a {trigger['type']} runtime cannot write every", "schedule.every")
        if stage == "setup":
            if "every" in schedule:
                self.error("setup-field", "a setup runtime cannot write every", "schedule.every")
            for banned in ("startTurn", "cooldownTurns"):
                if banned in trigger:
                    self.error("setup-field", f"a setup runtime cannot write {banned}", f"schedule.trigger.{banned}")

    def _compile_detached(self, written: bool | DetachedOptions | None, stage: str | None, visibility: str) -> bool | dict[str, Any]:
        """schedule.detached as its options (settle defaulted), or False; only post-turn and audit, never story."""
        detached: bool | dict[str, Any] = False
        if isinstance(written, DetachedOptions):
            detached = {"settle": False, "maxSettleWaitMs": DEFAULT_SETTLE_WAIT_MS, **written.model_dump(exclude_none=True)}
        elif written is True:
            detached = {"settle": False, "maxSettleWaitMs": DEFAULT_SETTLE_WAIT_MS}
        if detached:
            if stage not in ("post-turn", "audit"):
                self.error("detached-stage", "schedule.detached is only for post-turn and audit runtimes", "schedule.detached")
            if visibility == "story":
                self.error("detached-story", "a story runtime cannot be detached", "schedule.detached")
        return detached

    def _check_background_and_detached(self, trigger: dict[str, Any], *, background: bool, detached: bool) -> None:
        """A background runtime is not auto and has no same-turn upstream; a detached one has no operations to read."""
        if background and trigger["type"] == "auto":
            self.error(
                "background-auto",
                "schedule.background is for manual and event runtimes; an auto runtime runs inside the turn",
                "schedule.background",
            )
        inputs = (self.decl.io.inputs if self.decl.io else None) or {}
        for binding, spec in inputs.items():
            if spec.from_.kernel is None and background and (spec.scope or "turn") == "turn":
                self.drop(
                    "background-turn-input",
                    f"a background runtime has no upstream in the same execution; input `{binding}` cannot use scope: turn",
                    f"io.inputs.{binding}",
                    hint="use scope: committed with recordAs, or a kernel input",
                )
            if spec.from_.kernel == "operations@1" and detached:
                self.error(
                    "detached-operations-input",
                    "a detached runtime reads its source snapshot, which has no operations; it cannot read operations@1",
                    f"io.inputs.{binding}.from.kernel",
                    hint="read turn-digest@1 instead",
                )

    def dependencies(self, name: str) -> list[dict[str, Any]]:
        written = getattr(self.decl.schedule, name, None) if self.decl.schedule else None
        compiled = []
        for item in written or []:
            ref = item if isinstance(item, DependencyRef) else DependencyRef(runtime=item)
            entry = ref.model_dump(exclude_none=True)
            entry.setdefault("cardinality", "one")
            compiled.append(entry)
        return compiled

    def _compile_input(self, binding: str, spec: InputBinding, visibility: str) -> dict[str, Any]:
        """One io.inputs binding with its defaults (cardinality, scope, required); a kernel input is only its `from`."""
        source = spec.from_.model_dump(exclude_none=True)
        written = spec.model_dump(by_alias=True, exclude_none=True)
        if spec.from_.kernel is not None:
            if spec.from_.kernel not in KERNEL_INPUTS:
                self.error(
                    "unknown-kernel-input",
                    f"`{spec.from_.kernel}` is not a kernel input; one of: {', '.join(KERNEL_INPUTS)}",
                    f"io.inputs.{binding}.from.kernel",
                )
            for option in KERNEL_INPUT_OPTIONS:
                if option in written:
                    self.error(
                        "kernel-input-option",
                        f"a kernel input takes only `from`; remove `{option}`",
                        f"io.inputs.{binding}.{option}",
                    )
            return {"from": source}
        source.setdefault("cardinality", "one")
        scope = spec.scope or "turn"
        if scope == "committed" and spec.select is not None:
            self.error(
                "committed-select",
                "a scope: committed input reads the whole export; it cannot write select",
                f"io.inputs.{binding}.select",
            )
        elif spec.select is not None and (problem := json_pointer_problem(spec.select)):
            self.error(
                "invalid-json-pointer",
                f"select `{spec.select}` is not a JSON Pointer (RFC 6901): {problem}",
                f"io.inputs.{binding}.select",
                hint="write e.g. /narrativeOutput or /segments/0",
            )
        required = True if spec.required is None else spec.required
        if visibility == "story" and spec.from_.contract is not None and required:
            self.error(
                "story-required-input",
                "a story runtime cannot depend hard on another plugin: contract inputs must be required: false",
                f"io.inputs.{binding}.required",
                hint="write `required: false` and let the runtime run without the value",
            )
        compiled: dict[str, Any] = {"from": source, "scope": scope, "required": required}
        for option in ("select", "accepts", "recordAs"):
            if option in written:
                compiled[option] = written[option]
        return compiled

    def compile_io(self) -> dict[str, Any]:
        io = self.decl.io
        visibility = (io.visibility if io else None) or "system"
        concealed = bool(io.concealed) if io and io.concealed is not None else False
        if concealed and visibility == "story":
            self.error(
                "concealed-story",
                "io.concealed cannot be combined with io.visibility: story (story text is what the player reads)",
                "io.concealed",
            )
        inputs = {
            binding: self._compile_input(binding, spec, visibility) for binding, spec in ((io.inputs if io else None) or {}).items()
        }
        self_data = []
        for item in (io.selfData if io else None) or []:
            entry = item.model_dump(by_alias=True, exclude_none=True)
            entry.setdefault("format", DEFAULT_SELF_DATA_FORMAT)
            entry.setdefault("maxEntries", DEFAULT_SELF_DATA_MAX_ENTRIES)
            self_data.append(entry)
        output = io.output.model_dump(by_alias=True, exclude_none=True) if io and io.output else {}
        compiled_io: dict[str, Any] = {
            "inputs": inputs,
            "selfData": self_data,
            "output": output,
            "visibility": visibility,
            "concealed": concealed,
        }
        if io and io.payloadSchema is not None:
            compiled_io["payloadSchema"] = io.payloadSchema
        if visibility == "story":
            needs = (self.decl.schedule.needs if self.decl.schedule else None) or []
            for index, need in enumerate(needs):
                if isinstance(need, DependencyRef) and need.contract is not None:
                    self.error(
                        "story-contract-need",
                        "a story runtime cannot gate on another plugin's contract; use an optional input or schedule.after",
                        f"schedule.needs[{index}]",
                    )
        return compiled_io


def compile_runtime(
    decl: RuntimeDecl,
    source: RuntimeSource,
    bag: DiagnosticBag,
    *,
    prompt: str,
    prompt_variants: dict[str, str],
) -> CompiledRuntime | None:
    """The compiled runtime, or None when it cannot run (the reasons are in `bag`)."""
    mark = len(bag)
    compiler = _Compiler(decl, source, bag)
    manifest = compiler.compile()
    if compiler.unrunnable or bag.errors_since(mark):
        return None
    return CompiledRuntime(
        runtime_id=source.runtime_id,
        plugin_id=source.plugin_id,
        type=manifest["type"],
        stage=manifest["schedule"].get("stage", ""),
        visibility=manifest["io"]["visibility"],
        file=source.file,
        manifest=manifest,
        prompt=prompt,
        prompt_variants=dict(prompt_variants),
    )

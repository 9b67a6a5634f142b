"""A compiled runtime manifest: what the registry serves in RuntimeManifest.manifest.

Every field the registry always fills is required here; a field without a default is optional
(None: not written, and nothing is assumed in its place). The defaults themselves are decided
once, in services/registry/runtime_compiler.py.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from shared.manifest.base import Cardinality, ManifestModel

Stage = Literal["setup", "pre-turn", "narrative", "post-turn", "audit"]
KernelInputName = Literal["turn-digest@1", "operations@1", "world.dimensions@1", "session.world-context@1"]


# ----- schedule --------------------------------------------------------------------------------


class DependencyTarget(ManifestModel):
    """An entry of schedule.needs / schedule.after: a runtime of the package or a contract."""

    runtime: str | None = None
    contract: str | None = None
    cardinality: Cardinality


class Trigger(ManifestModel):
    type: Literal["auto", "manual", "event"]
    start_turn: int | None = None
    cooldown_turns: int | None = None
    max_trigger_count: int | None = None
    event: str | None = None
    events: list[str] | None = None

    @property
    def topics(self) -> set[str]:
        """The event topics an event runtime follows (empty for other triggers)."""
        if self.type != "event":
            return set()
        return {topic for topic in [self.event, *(self.events or [])] if topic}


class DetachedOptions(ManifestModel):
    settle: bool
    max_settle_wait_ms: int
    max_queue_ms: int | None = None
    max_execution_ms: int | None = None
    # A newer job supersedes this runtime's jobs of the session still queued (it reads the latest state).
    coalesce: bool = False


class Schedule(ManifestModel):
    # Only auto runtimes have a stage.
    stage: Stage | None = None
    every: int
    trigger: Trigger
    needs: list[DependencyTarget]
    after: list[DependencyTarget]
    # `false`, or the options of a detached runtime.
    detached: DetachedOptions | Literal[False]
    background: bool
    subagent_only: bool


# ----- io --------------------------------------------------------------------------------------


class InputSource(ManifestModel):
    """Where a runtime or contract input comes from (exactly one of runtime, contract)."""

    runtime: str | None = None
    contract: str | None = None
    cardinality: Cardinality


class KernelSource(ManifestModel):
    kernel: KernelInputName
    # Kept when written; a kernel input has one value.
    cardinality: Cardinality | None = None


class KernelInput(ManifestModel):
    """An input the kernel supplies (turn-digest@1, operations@1): only its `from`."""

    from_: KernelSource = Field(alias="from")


class InputBinding(ManifestModel):
    from_: InputSource = Field(alias="from")
    scope: Literal["turn", "committed"]
    required: bool
    select: str | None = None
    accepts: str | None = None
    record_as: str | None = None


class SelfData(ManifestModel):
    namespace: str
    as_: str | None = Field(default=None, alias="as")
    format: Literal["summary", "full"]
    max_entries: int


class Output(ManifestModel):
    contract: str | None = None
    schema_: str | None = Field(default=None, alias="schema")
    record_as: str | None = None


class IO(ManifestModel):
    inputs: dict[str, InputBinding | KernelInput]
    self_data: list[SelfData]
    output: Output
    visibility: Literal["story", "system"]
    concealed: bool
    # A package file, or an inline JSON Schema.
    payload_schema: str | dict[str, Any] | None = None

    def kernel_inputs(self) -> set[str]:
        return {spec.from_.kernel for spec in self.inputs.values() if isinstance(spec, KernelInput)}

    def bindings(self) -> dict[str, InputBinding]:
        """The runtime and contract inputs (kernel inputs left out)."""
        return {name: spec for name, spec in self.inputs.items() if isinstance(spec, InputBinding)}


# ----- agent -----------------------------------------------------------------------------------


class NamedToolChoice(ManifestModel):
    name: str


class HistoryWindow(ManifestModel):
    # Player turns of history; left out, the scheduler's setting applies.
    max_turns: int | None = None
    include_summaries: bool | None = None


class ServiceImport(ManifestModel):
    contract: str
    as_: str | None = Field(default=None, alias="as")


class DatasetImport(ManifestModel):
    dataset: str
    tools: list[str]


class AgentTools(ManifestModel):
    plugin: list[str]
    services: list[ServiceImport]
    datasets: list[DatasetImport]


class Completion(ManifestModel):
    require: Literal["tool-use", "explicit"] | None = None
    after_tools: list[str] | None = None


class Finalizer(ManifestModel):
    max_steps: bool
    deadline_reserve_ms: int


class Corrections(ManifestModel):
    tool_use: int
    review: int
    loop_perturbation: int
    output_repair: int


class Loop(ManifestModel):
    profile: Literal["story", "actor", "system"]
    timeout_ms: int
    call_timeout_ms: int
    max_retries: int
    max_steps: int
    idle_timeout_ms: int
    loop_detection: int
    max_recursion_depth: int
    stream: bool
    steering: bool
    truncation: Literal["accept", "reject"]
    fallback: Literal["answer-without-tools", "fail"]
    finalizer: Finalizer
    corrections: Corrections
    # Left out: a streamed call waits for its first token as long as for any other.
    first_token_timeout_ms: int | None = None


class Agent(ManifestModel):
    model: str
    reasoning: bool
    tools: AgentTools
    loop: Loop
    tool_choice: Literal["auto", "required", "none"] | NamedToolChoice | None = None
    finish_with: str | None = None
    completion: Completion | None = None
    history: HistoryWindow | None = None


# ----- function, datasets, permissions -----------------------------------------------------------


# The two values the registry decides but does not write into a manifest, for readers to use:
# the ctx.gateway slot when function.model is not written (an unwritten model also tells that the
# function calls no model: the cost tags), and how deep ctx.recursive_call may nest from a function
# (an agent's is its agent.loop.maxRecursionDepth; the compiler's default is this one).
FUNCTION_SLOT_WHEN_UNWRITTEN = "plugin"
MAX_RECURSION_DEPTH = 10


class Function(ManifestModel):
    handler: str
    tools: list[str]
    timeout_ms: int
    model: str | None = None

    @property
    def slot(self) -> str:
        """The gateway slot of ctx.gateway."""
        return self.model or FUNCTION_SLOT_WHEN_UNWRITTEN


class Dataset(ManifestModel):
    """A compiled contributes.datasets entry (the package's, copied into each runtime)."""

    namespace: str
    schema_: str = Field(alias="schema")
    ops: list[str]
    tools: list[str]
    key: str | None = None
    description: str | None = None


class HttpPermission(ManifestModel):
    origin: str
    methods: list[str] | None = None


class Permissions(ManifestModel):
    http: list[HttpPermission] | None = None


class CompiledManifest(ManifestModel):
    """One runtime as the scheduler runs it."""

    id: str
    plugin_id: str
    type: Literal["agent", "function"]
    file: str
    version: str
    schedule: Schedule
    io: IO
    datasets: dict[str, Dataset]
    agent: Agent | None = None
    function: Function | None = None
    guard: str | None = None
    guard_timeout_ms: int | None = None
    effects: dict[str, Any] | None = None
    permissions: Permissions | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> CompiledManifest:
        if (self.type == "agent") != (self.agent is not None) or (self.type == "function") != (self.function is not None):
            raise ValueError(f"a {self.type} runtime has exactly its own block: `{self.type}` and not the other")
        if (self.guard is None) != (self.guard_timeout_ms is None):
            raise ValueError("guard and guardTimeoutMs are written together")
        return self

    @property
    def agent_part(self) -> Agent:
        """The agent block of an agent runtime (a function runtime has none)."""
        if self.agent is None:
            raise TypeError(f"{self.id} is a function runtime; it has no agent block")
        return self.agent

    @property
    def function_part(self) -> Function:
        """The function block of a function runtime (an agent runtime has none)."""
        if self.function is None:
            raise TypeError(f"{self.id} is an agent runtime; it has no function block")
        return self.function

    @property
    def gateway_slot(self) -> str:
        """The slot of ctx.gateway in its handler or guard."""
        return self.function.slot if self.function is not None else FUNCTION_SLOT_WHEN_UNWRITTEN

    @property
    def max_recursion_depth(self) -> int:
        """How deep ctx.recursive_call may nest from this runtime's handler or guard."""
        return self.agent.loop.max_recursion_depth if self.agent is not None else MAX_RECURSION_DEPTH

    @property
    def is_detached(self) -> bool:
        return self.schedule.detached is not False

    @property
    def is_manual_action(self) -> bool:
        """A runtime the player starts by hand (subagentOnly ones are started by other runtimes)."""
        return self.schedule.trigger.type == "manual" and not self.schedule.subagent_only


def parse_manifest(data: dict[str, Any]) -> CompiledManifest:
    """The served JSON form as a CompiledManifest; ManifestError names every field that does not fit."""
    return CompiledManifest.parse(data, f"the compiled manifest of {data.get('id') or 'a runtime'}")

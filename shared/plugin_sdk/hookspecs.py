"""Python hookspecs (spec: python-hookspecs): a plugin as an object with `@hookimpl` methods.

    from shared.plugin_sdk.hookspecs import ToolCallDecision, hookimpl

    class Policy:
        @hookimpl
        def before_tool_call(self, call, state):
            if call.tool == "delete-everything":
                return ToolCallDecision.deny("not in this story")

    def register(covel):
        covel.register_hookimpls(Policy())

The hooks service maps the hooks onto the contract's events (services/hooks/plugin_side/hookspec_adapter.py):
before_llm_call / after_llm_call onto PreLLMCall and PostLLMResponse (after_llm_call also onto
PostRuntime, where it hears of calls that failed, a subagent's at its caller's PostRuntime;
a Post… event is matched to its Pre… by the context's execution_id), before_tool_call /
after_tool_call onto PreToolUse and PostToolUse, system_prompt onto PostContextAssembly,
on_error onto PostRuntime, provide_tools onto registered tools; and some turn and app hooks
(services/hooks/plugin_side/turn_hooks.py, app_hooks.py: build_prompt, run_model, load_state, save_state, …), and the
channel host `covel channel` calls provide_channels and resolve_session. Every other hook of the spec is
declared here (CovelHookSpecs, with the types of turn_types.py and app_types.py) but not called by
the kernel yet: a plugin implementing one fails to load with a message naming it (docs/hookspecs.md
has the table of every hook). Unlike `covel.on` handlers,
a hookimpl that raises or returns the wrong type is logged and skipped: a security policy
must return `ToolCallDecision.deny(...)`, never rely on raising. Order is pluggy's: the
last registered first, `@hookimpl(tryfirst=True)` / `(trylast=True)` move an impl. Wrappers
(`@hookimpl(wrapper=True)`, `hookwrapper=True`) are refused when the plugin loads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pluggy

from shared.plugin_sdk.app_types import (
    AdmitDecision,
    AsyncTapeStore,
    Channel,
    Environment,
    MessageHandler,
    ModelOptions,
    SteeringInbox,
    TapeContext,
    TapeSidecar,
    TapeStore,
    TurnSnapshot,
)
from shared.plugin_sdk.turn_types import (
    AsyncStreamEvents,
    Envelope,
    LegacyPrompt,
    StreamEvent,
    StreamState,
    Tape,
    TurnState,
    UserContent,
)

PROJECT = "covel"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@dataclass(frozen=True)
class LLMCallRequest:
    # "<turn id>:<runtime id>" (concurrent runs of one runtime share it: state["execution_id"] tells them apart).
    run_id: str
    model: str
    # Chat messages as the model receives them: {"role", "content", "tool_calls"?, "tool_call_id"?}.
    messages: list[dict[str, Any]]
    tool_names: tuple[str, ...] = ()
    # The kernel's PreLLMCall cannot change the output limit: a changed max_tokens is ignored (logged).
    max_tokens: int | None = None


@dataclass(frozen=True)
class LLMCallDecision:
    action: Literal["finish"] = "finish"
    text: str = ""

    @classmethod
    def finish(cls, text: str) -> LLMCallDecision:
        """Answer this call with `text`: the model is not asked (PreLLMCall's replace.response)."""
        return cls("finish", text)


@dataclass(frozen=True)
class LLMCallResult:
    run_id: str
    text: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # The response's usage ({promptTokens, completionTokens, totalTokens}); None for a failed call.
    usage: dict[str, Any] | None = None
    # A call that got no answer (LLMCallFailed with the runtime's reason); then text is None.
    error: Exception | None = None
    # Between the call leaving this plugin's PreLLMCall and the answer reaching its PostLLMResponse.
    duration_ms: int = 0


@dataclass(frozen=True)
class ToolCall:
    run_id: str
    tool: str
    arguments: dict[str, Any]
    context: Any = field(default=None, repr=False, compare=False)
    # The model's id of this call: this kernel's addition, after the spec's fields so that the spec's positional
    # form ToolCall(run_id, tool, arguments, context) means the same here.
    call_id: str = ""


@dataclass(frozen=True)
class ToolCallDecision:
    action: Literal["proceed", "replace", "deny"] = "proceed"
    arguments: dict[str, Any] | None = None
    result: Any = None
    message: str | None = None

    @classmethod
    def proceed(cls, arguments: dict[str, Any] | None = None) -> ToolCallDecision:
        """Run the tool, with these arguments when given."""
        return cls("proceed", arguments=arguments)

    @classmethod
    def replace(cls, result: Any) -> ToolCallDecision:
        """Do not run the tool: the model reads `result` as its data; a successful call."""
        return cls("replace", result=result)

    @classmethod
    def deny(cls, message: str) -> ToolCallDecision:
        """Refuse the call: the model reads a `refused` error with `message`."""
        return cls("deny", message=message)


@dataclass
class ToolCallResult:
    run_id: str
    tool: str
    arguments: dict[str, Any]
    result: Any = None
    error: Exception | None = None
    duration_ms: int = 0


class ToolCallFailed(Exception):
    """A tool call's failure as after_tool_call sees it: the unified result's error, or a refusal."""

    def __init__(self, code: str, message: str, hint: str = "") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.hint = hint


class RuntimeFailed(Exception):
    """on_error's error when a runtime failed: its reason."""


@dataclass(frozen=True)
class Tool:
    """What provide_tools returns: registered like covel.register_tool (declare it in contributes.tools)."""

    name: str
    handler: Callable[..., Any]
    description: str = ""
    parameters: dict[str, Any] | None = None
    read_only: bool = False


class CovelHookSpecs:
    """Every hook of the spec, with its signature: argument names are checked against these. Which ones the
    kernel calls, and onto what, is services/hooks/common/hookspec_events.py (docs/hookspecs.md); implementing one
    it does not call yet fails the plugin's load with a message naming it."""

    # ----- turn hooks

    @hookspec
    def resolve_session(self, message: Envelope) -> str:  # type: ignore[empty-body]  # a spec: pluggy calls the impls
        """The session an inbound envelope belongs to (channels)."""

    @hookspec
    def load_state(self, message: Envelope, session_id: str) -> TurnState:  # type: ignore[empty-body]  # a spec
        """State for this turn, before it runs."""

    @hookspec
    def build_prompt(self, message: Envelope, session_id: str, state: TurnState) -> list[UserContent] | LegacyPrompt:  # type: ignore[empty-body]  # a spec
        """The prompt a story agent sends for this message."""

    @hookspec
    def run_model(self, prompt: str | list[dict], session_id: str, state: TurnState) -> str:  # type: ignore[empty-body]  # a spec
        """Answer instead of the model gateway."""

    @hookspec
    def run_model_stream(self, prompt: str | list[dict], session_id: str, state: TurnState) -> AsyncStreamEvents:  # type: ignore[empty-body]  # a spec
        """Answer instead of the model gateway, as a stream of events."""

    @hookspec
    def continue_prompt(self, prompt: str | list[dict] | None, tape: Tape, state: StreamState) -> str | None:
        """After a step that ended with status "continue": the next step's prompt, or None."""

    @hookspec
    def save_state(self, session_id: str, state: TurnState, message: Envelope, model_output: str) -> None:
        """After the turn: its state, message and output."""

    @hookspec
    def render_outbound(self, message: Envelope, session_id: str, state: TurnState, model_output: str) -> list[Envelope]:  # type: ignore[empty-body]  # a spec
        """What leaves after a committed turn, as envelopes."""

    @hookspec
    def dispatch_outbound(self, message: Envelope) -> bool:  # type: ignore[empty-body]  # a spec
        """Send one outbound envelope; True when it was delivered."""

    # ----- app hooks

    @hookspec
    def register_cli_commands(self, app: Any) -> None:
        """Subcommands of `covel`."""

    @hookspec
    def onboard_config(self, current_config: dict[str, Any]) -> dict[str, Any] | None:
        """This plugin's part of `covel onboard`: settings to add, or None."""

    @hookspec
    def provide_model_options(self, session_id: str, workspace: Path | None) -> ModelOptions | None:
        """A session's model choice."""

    @hookspec
    def provide_environment(self, session_id: str, workspace: Path) -> Environment | None:
        """A session's environment."""

    @hookspec
    def on_error(self, stage: str, error: Exception, message: Envelope | None) -> None:
        """A failure: stage "runtime" (a runtime failed) or the name of this plugin's hook that raised."""

    @hookspec
    def system_prompt(self, prompt: str | list[dict], state: TurnState) -> str:  # type: ignore[empty-body]  # a spec
        """Text to add to the agent's system prompt; `prompt` is the player's message."""

    @hookspec
    def provide_tape_store(self) -> TapeStore | AsyncTapeStore | None:
        """Where tapes are kept."""

    @hookspec
    def provide_lifespan(self) -> AsyncIterator[None] | Iterator[None] | None:
        """Entered when the hosting service starts, left when it stops."""

    @hookspec
    def provide_tape_sidecar(self) -> TapeSidecar:  # type: ignore[empty-body]  # a spec
        """Something that hears of every entry appended to a tape."""

    @hookspec
    def provide_channels(self, message_handler: MessageHandler) -> list[Channel]:  # type: ignore[empty-body]  # a spec
        """Inbound/outbound channels; `message_handler` submits an inbound envelope."""

    @hookspec
    def build_tape_context(self) -> TapeContext:  # type: ignore[empty-body]  # a spec
        """How a tape becomes a model's context."""

    @hookspec
    def admit_message(self, session_id: str, message: Envelope, turn: TurnSnapshot) -> AdmitDecision | None:
        """A message submitted while a turn runs: queue, steer or refuse."""

    @hookspec
    def provide_steering_inbox(self) -> SteeringInbox | None:
        """Messages that join a running turn at its next step."""

    @hookspec
    def provide_tools(self) -> list[Tool]:  # type: ignore[empty-body]  # a spec: pluggy calls the impls
        """Tools this plugin offers (called once, when the plugin loads)."""

    # ----- agent hooks

    @hookspec
    def before_llm_call(self, request: LLMCallRequest, state: TurnState) -> LLMCallRequest | LLMCallDecision | None:
        """Before each model call: return a changed request, LLMCallDecision.finish(text), or None."""

    @hookspec
    def after_llm_call(self, request: LLMCallRequest, result: LLMCallResult, state: TurnState) -> None:
        """After each model call: its answer, or (error set) its failure."""

    @hookspec
    def before_tool_call(self, call: ToolCall, state: TurnState) -> ToolCallDecision | None:
        """Before each tool call: proceed(arguments), replace(result), deny(message), or None."""

    @hookspec
    def after_tool_call(self, call: ToolCall, result: ToolCallResult, state: TurnState) -> None:
        """After each tool call: success, failure, refusal (by any plugin), or replacement."""


HOOK_NAMES: tuple[str, ...] = tuple(name for name in vars(CovelHookSpecs) if not name.startswith("_"))

__all__ = [
    "HOOK_NAMES",
    "PROJECT",
    "AdmitDecision",
    "AsyncStreamEvents",
    "AsyncTapeStore",
    "Channel",
    "CovelHookSpecs",
    "Envelope",
    "Environment",
    "LLMCallDecision",
    "LLMCallRequest",
    "LLMCallResult",
    "LegacyPrompt",
    "MessageHandler",
    "ModelOptions",
    "RuntimeFailed",
    "SteeringInbox",
    "StreamEvent",
    "StreamState",
    "Tape",
    "TapeContext",
    "TapeSidecar",
    "TapeStore",
    "Tool",
    "ToolCall",
    "ToolCallDecision",
    "ToolCallFailed",
    "ToolCallResult",
    "TurnSnapshot",
    "TurnState",
    "UserContent",
    "hookimpl",
    "hookspec",
]

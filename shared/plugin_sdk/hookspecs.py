"""Python hookspecs (spec: python-hookspecs): a plugin as an object with `@hookimpl` methods.

    from shared.plugin_sdk.hookspecs import ToolCallDecision, hookimpl

    class Policy:
        @hookimpl
        def before_tool_call(self, call, state):
            if call.tool == "delete-everything":
                return ToolCallDecision.deny("not in this story")

    def register(covel):
        covel.register_hookimpls(Policy())

The hooks service maps the hooks onto the contract's events (services/hooks/hookspec_adapter.py):
before_llm_call / after_llm_call onto PreLLMCall and PostLLMResponse (after_llm_call also onto
PostRuntime, where it hears of calls that failed, a subagent's at its caller's PostRuntime;
a Post… event is matched to its Pre… by the context's execution_id), before_tool_call /
after_tool_call onto PreToolUse and PostToolUse, system_prompt onto PostContextAssembly,
on_error onto PostRuntime, provide_tools onto registered tools. Unlike `covel.on` handlers,
a hookimpl that raises or returns the wrong type is logged and skipped: a security policy
must return `ToolCallDecision.deny(...)`, never rely on raising. Order is pluggy's: the
last registered first, `@hookimpl(tryfirst=True)` / `(trylast=True)` move an impl. Wrappers
(`@hookimpl(wrapper=True)`, `hookwrapper=True`) are refused when the plugin loads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pluggy

PROJECT = "covel"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# What `state` holds in every hook: a plain dict, new for each call.
# session_id, turn_id, locale, plugin_id and runtime_id of the runtime; execution_id (which run of the
# runtime: concurrent subagents of one provider differ), subagent_call_id and parent_runtime_id ("" unless a
# subagent run); and `ctx` (the HookContext).
TurnState = dict[str, Any]


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
        """Answer this call with `text` instead of the model's reply (the model is still asked, without
        tools or streaming: PreLLMCall cannot skip the call; see docs/event-hooks.md)."""
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
    # The model's id of this call.
    call_id: str = ""
    context: Any = field(default=None, repr=False, compare=False)


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
        """Do not run the tool: the model reads `result` as its data (a successful call for a plugin's
        tool; a kernel tool's call is counted as failed, see docs/event-hooks.md)."""
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
    """The hooks a hookimpl object may implement; argument names are checked against these."""

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

    @hookspec
    def system_prompt(self, prompt: str | list[dict], state: TurnState) -> str:  # type: ignore[empty-body]  # a spec: pluggy calls the impls
        """Text to add to the agent's system prompt; `prompt` is the player's message."""

    @hookspec
    def provide_tools(self) -> list[Tool]:  # type: ignore[empty-body]  # a spec: pluggy calls the impls
        """Tools this plugin offers (called once, when the plugin loads)."""

    @hookspec
    def on_error(self, stage: str, error: Exception, message: Any) -> None:
        """A failure: stage "runtime" (a runtime failed) or the name of this plugin's hook that raised."""


HOOK_NAMES: tuple[str, ...] = tuple(name for name in vars(CovelHookSpecs) if not name.startswith("_"))

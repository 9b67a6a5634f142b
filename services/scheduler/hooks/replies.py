"""What the hooks' handlers returned, read per event: each event whose `replace` the kernel takes has one record
built from the dispatch's outcome (`HookOutcome`), naming the fields its site reads. An abort is the outcome's
own (`aborted`, `reason`). What a replaced field may change stays rules.py's (and the runtime's own rules'):
these records only read the fields, as the handlers left them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.scheduler.hooks.bus import HookOutcome
from services.scheduler.hooks.rules import answered_result, replaced_payload


def changed_fields(sent: dict[str, Any], returned: dict[str, Any]) -> dict[str, Any]:
    """What a hook's merged payload changed: the fields that are new or differ from the sent payload."""
    return {key: value for key, value in returned.items() if key not in sent or sent[key] != value}


def _without_previous(payload: dict[str, Any]) -> dict[str, Any]:
    """PreStep's payload less `previous`: what a hook may have replaced (comparing the conversation would cost a deep compare)."""
    return {key: value for key, value in payload.items() if key != "previous"}


@dataclass(frozen=True)
class PreScheduleReply:
    """PreSchedule: the runtimes as the hooks left them (rules.filter_schedule keeps what it may)."""

    triggered: Any

    @classmethod
    def of(cls, outcome: HookOutcome) -> PreScheduleReply:
        return cls(outcome.payload.get("triggered"))


@dataclass(frozen=True)
class PostContextAssemblyReply:
    """PostContextAssembly: the system prompt as the hooks left it, and the messages when they are a list."""

    system_prompt: Any
    messages: list[Any] | None

    @classmethod
    def of(cls, outcome: HookOutcome) -> PostContextAssemblyReply:
        messages = outcome.payload.get("messages")
        return cls(outcome.payload.get("systemPrompt"), messages if isinstance(messages, list) else None)


@dataclass(frozen=True)
class PreStepReply:
    """PreStep: the fields a hook changed (`previous` is not one), as rules.apply_pre_step reads them; the interjections
    among them (the loop's to take or not)."""

    replace: dict[str, Any]

    @classmethod
    def of(cls, outcome: HookOutcome) -> PreStepReply:
        return cls(changed_fields(_without_previous(outcome.sent), _without_previous(outcome.payload)))

    @property
    def interjections(self) -> Any:
        return self.replace.get("interjections")


@dataclass(frozen=True)
class PreLLMCallReply:
    """PreLLMCall: the call's payload as the hooks left it (agent/model_call.py apply_pre_llm_call reads its fields)."""

    payload: dict[str, Any]

    @classmethod
    def of(cls, outcome: HookOutcome) -> PreLLMCallReply:
        return cls(outcome.payload)


@dataclass(frozen=True)
class PostLLMResponseReply:
    """PostLLMResponse: a correction to send the draft back with (a non-blank text), else the replaced answer's text."""

    correction: str | None
    content: str | None

    @classmethod
    def of(cls, outcome: HookOutcome) -> PostLLMResponseReply:
        correction = outcome.payload.get("correction")
        response = outcome.payload.get("response")
        content = response.get("content") if isinstance(response, dict) else None
        return cls(correction if isinstance(correction, str) and correction.strip() else None,
                   content if isinstance(content, str) else None)


@dataclass(frozen=True)
class PostRuntimeReply:
    """PostRuntime: the result as the hooks left it (turn/unit_outcome.py apply_post_runtime takes what it may)."""

    result: Any

    @classmethod
    def of(cls, outcome: HookOutcome) -> PostRuntimeReply:
        return cls(outcome.payload.get("result"))


@dataclass(frozen=True)
class PreToolUseReply:
    """PreToolUse: the fields a hook changed (rules.apply_pre_tool_use), and the call's result text when a hook answered
    it with replace.result (the tool then does not run; None: not answered)."""

    replace: dict[str, Any]
    answer: str | None

    @classmethod
    def of(cls, outcome: HookOutcome) -> PreToolUseReply:
        return cls(changed_fields(outcome.sent, outcome.payload), answered_result(outcome.payload))


@dataclass(frozen=True)
class PostToolUseReply:
    """PostToolUse: the fields a hook changed (rules.apply_post_tool_use: result, terminate)."""

    replace: dict[str, Any]

    @classmethod
    def of(cls, outcome: HookOutcome) -> PostToolUseReply:
        return cls(changed_fields(outcome.sent, outcome.payload))


@dataclass(frozen=True)
class PreStateCommitReply:
    """PreStateCommit: the proposal's payload as the hooks left it, the one to commit (None when what they left is not
    an object: the proposal's own stays); type, source and id stay the kernel's."""

    payload: dict[str, Any] | None

    @classmethod
    def of(cls, outcome: HookOutcome) -> PreStateCommitReply:
        return cls(replaced_payload(outcome.payload))

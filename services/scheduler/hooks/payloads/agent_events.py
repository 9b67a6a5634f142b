"""An agent runtime's hook payloads: PostContextAssembly, PreStep, PreLLMCall and PostLLMResponse.

Messages are in the chat format the gateway is sent ({role, content, tool_calls?, tool_call_id?}); the lists are
the run's own, not copies (a payload is serialised only when a listener takes it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from services.scheduler.hooks.payloads.base import HookPayload


@dataclass(frozen=True)
class PostContextAssembly(HookPayload):
    """After an agent's context is assembled: `{systemPrompt, messages, outputKind, promptTemplate, promptSegments,
    currentCharacterId?, inputSlots?, characters?}` (outputKind `story` or `system`; currentCharacterId: the main seat's
    character, when it has one; inputSlots: the bound io.inputs as ctx.inputs holds them; characters: the session's
    character records, shown as {id, name, type, description})."""

    event: ClassVar[str] = "PostContextAssembly"
    system_prompt: str
    messages: list[dict[str, Any]]
    story: bool
    prompt_template: str
    prompt_segments: list[dict[str, str]]
    current_character_id: str = ""
    input_slots: dict[str, Any] | None = None
    characters: list[dict[str, Any]] | None = None

    def wire(self) -> dict[str, Any]:
        return {
            "systemPrompt": self.system_prompt, "messages": self.messages, "outputKind": "story" if self.story else "system",
            "promptTemplate": self.prompt_template, "promptSegments": self.prompt_segments,
            **({"currentCharacterId": self.current_character_id} if self.current_character_id else {}),
            **({"inputSlots": self.input_slots} if self.input_slots is not None else {}),
            **({"characters": character_summaries(self.characters)} if self.characters is not None else {}),
        }


CHARACTER_FIELDS = ("id", "name", "type", "description")


def character_summaries(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The session's characters as PostContextAssembly shows them: id, name, type, description (those they have)."""
    return [{key: record[key] for key in CHARACTER_FIELDS if key in record} for record in records]


@dataclass(frozen=True)
class PreStep(HookPayload):
    """Before each step of an agent's tool loop: `{step, stepsRemaining, maxSteps, toolNames, toolChoice, steering, previous?}`.
    `tool_choice`: "auto", "required" or {name}; `previous` (agent/continued_step.py) only after a step that continued."""

    event: ClassVar[str] = "PreStep"
    step: int
    steps_remaining: int
    max_steps: int
    tool_names: list[str]
    tool_choice: Any
    steering: bool
    previous: dict[str, Any] | None = None

    def wire(self) -> dict[str, Any]:
        return {
            "step": self.step, "stepsRemaining": self.steps_remaining, "maxSteps": self.max_steps, "toolNames": self.tool_names,
            "toolChoice": self.tool_choice, "steering": self.steering, **({"previous": self.previous} if self.previous is not None else {}),
        }


@dataclass(frozen=True)
class PreLLMCall(HookPayload):
    """Before each model call: `{messages, model, tools, stream, promptSegments}` (messages with the system prompt first)."""

    event: ClassVar[str] = "PreLLMCall"
    messages: list[dict[str, Any]]
    model: str
    tools: list[str]
    stream: bool
    prompt_segments: list[dict[str, str]]

    def wire(self) -> dict[str, Any]:
        return {"messages": self.messages, "model": self.model, "tools": self.tools, "stream": self.stream,
                "promptSegments": self.prompt_segments}


@dataclass(frozen=True)
class PostLLMResponse(HookPayload):
    """After each model answer: `{response: {content, finishReason, toolCalls, usage: {promptTokens, completionTokens,
    totalTokens}}, messages}` (`messages`: what the call was sent)."""

    event: ClassVar[str] = "PostLLMResponse"
    content: str
    finish_reason: str
    tool_calls: list[dict[str, Any]]
    prompt_tokens: int
    completion_tokens: int
    messages: list[Any]

    def wire(self) -> dict[str, Any]:
        usage = {"promptTokens": self.prompt_tokens, "completionTokens": self.completion_tokens,
                 "totalTokens": self.prompt_tokens + self.completion_tokens}
        return {"response": {"content": self.content, "finishReason": self.finish_reason, "toolCalls": self.tool_calls, "usage": usage},
                "messages": self.messages}

"""The gateway's own view of a call: plain dataclasses, independent of proto and HTTP."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.kernel_prompts import KERNEL_PROMPTS

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    # JSON text, as providers send it.
    arguments: str


@dataclass(frozen=True)
class Message:
    role: str
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ResponseFormat:
    name: str
    schema: dict[str, Any]
    strict: bool = False


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Call:
    """One logical model call as the caller asked for it."""

    slot: str
    messages: tuple[Message, ...]
    model_override: str = ""
    tools: tuple[Tool, ...] = ()
    # "", "auto", "required", "none", or a tool name.
    tool_choice: str = ""
    response_format: ResponseFormat | None = None
    call_timeout_ms: int = 0
    first_token_timeout_ms: int = 0
    idle_timeout_ms: int = 0
    # The runtime's agent.loop.timeoutMs left (0: the gateway's budget) and maxRetries (None: the gateway's default).
    timeout_ms: int = 0
    max_retries: int | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    origin: dict[str, str] = field(default_factory=dict)
    # False: the call must not think (agent.reasoning: false); None or True: the model's own setting.
    reasoning: bool | None = None

    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            # The kernel's task and continue prompts are not the player's words (shared/kernel_prompts.py).
            if message.role == "user" and message.content.strip() and message.content.strip() not in KERNEL_PROMPTS:
                return message.content.strip()
        return ""

    def forced_tool(self) -> Tool | None:
        """The tool the caller requires a call to, if any ("required" picks the first)."""
        if not self.tools or self.tool_choice in ("", "auto", "none"):
            return None
        if self.tool_choice == "required":
            return self.tools[0]
        for tool in self.tools:
            if tool.name == self.tool_choice:
                return tool
        return None


@dataclass(frozen=True)
class EmbedCall:
    slot: str
    inputs: tuple[str, ...]
    timeout_ms: int = 0


@dataclass(frozen=True)
class Embedded:
    """What a provider answered: one vector per input, in order."""

    vectors: list[list[float]]
    usage: Usage
    provider: str = ""
    model: str = ""
    attempts: int = 0

    @property
    def dimensions(self) -> int:
        return len(self.vectors[0]) if self.vectors else 0

"""Thinking models (spec: 工具选择和思考): how a provider's models think, what turns it off for one call
(agent.reasoning: false), and the rule that a model in thinking mode is never sent a forced tool choice.

A provider's `thinking` (COVEL_GATEWAY_CONFIG providers.<name>.thinking, or COVEL_GATEWAY_OPENAI_THINKING):
- unset: its models do not think (or the operator does not say): requests go as asked;
- `always`: they think on every call: a forced tool choice ("required", a tool's name) is sent as "auto";
- `switchable`: they think unless the call turns it off: a call with reasoning false is sent the provider's
  `thinking_off` fields (default {"reasoning_effort": "minimal"}) and keeps its forced choice; any other call thinks,
  so its forced choice goes as "auto".
"""

from __future__ import annotations

from typing import Any

ALWAYS = "always"
SWITCHABLE = "switchable"
MODES = ("", ALWAYS, SWITCHABLE)
DEFAULT_THINKING_OFF: dict[str, Any] = {"reasoning_effort": "minimal"}
FORCED = "required"


class ThinkingConfigError(ValueError):
    """A provider's thinking settings cannot be used."""


def thinking_config(mode: Any, off: Any, where: str) -> dict[str, Any]:
    """ProviderConfig's thinking fields from the written ones; ThinkingConfigError naming `where`."""
    mode = "" if mode is None else mode
    if mode not in MODES:
        raise ThinkingConfigError(f"{where}.thinking must be one of always, switchable (or unset), not {mode!r}")
    if off is not None and (not isinstance(off, dict) or mode != SWITCHABLE):
        raise ThinkingConfigError(f"{where}.thinking_off is a mapping of request fields, only with thinking: switchable")
    return {"thinking": mode, "thinking_off": dict(off) if off is not None else (dict(DEFAULT_THINKING_OFF) if mode == SWITCHABLE else {})}


def thinks(mode: str, reasoning: bool | None) -> bool:
    """Whether a call thinks: always, or switchable and not turned off."""
    return mode == ALWAYS or (mode == SWITCHABLE and reasoning is not False)


def apply_thinking(body: dict[str, Any], mode: str, off: dict[str, Any], reasoning: bool | None) -> dict[str, Any]:
    """The request body with thinking turned off when asked (switchable), and a forced tool choice sent as auto while
    the model thinks."""
    if mode == SWITCHABLE and reasoning is False:
        body.update(off)
    if thinks(mode, reasoning) and body.get("tool_choice") not in (None, "auto", "none"):
        body["tool_choice"] = "auto"
    return body

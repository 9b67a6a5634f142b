"""The scripted model's answers for builtin plugins' agents, one module per plugin (`codex.py`, ...).

A module registers what it writes, and every module of this package is imported once on first use:

    @writes("codex.entries@1")                 # a structured reply: the response_format's contract
    def codex_entries(reply: WriterCall) -> dict: ...

    @plans_tool("relations-search")            # a tool call an agent is expected to make
    def search_relations(reply: WriterCall) -> dict | None: ...   # its arguments, or None: not now

The contract is the response_format's schema `title` (or its name with `@` written `-`). A writer reads the
call through WriterCall: the player's words, the system prompt, the runtime's bound inputs (by binding
name), the rows of its own plugin data shown in the prompt, and a seed for deterministic choices.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Writer = Callable[["WriterCall"], dict[str, Any]]
ToolPlan = Callable[["WriterCall"], "dict[str, Any] | None"]
WRITERS: dict[str, Writer] = {}
TOOL_PLANS: dict[str, ToolPlan] = {}
_loaded = False


@dataclass(frozen=True)
class WriterCall:
    player_text: str
    system: str
    inputs: dict[str, Any]
    seed: str
    # Tool names already called in this conversation (a plan usually runs once).
    called: tuple[str, ...] = ()
    messages: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def writes(contract: str) -> Callable[[Writer], Writer]:
    return _registering(WRITERS, contract, "scripted writers for")


def plans_tool(tool_name: str) -> Callable[[ToolPlan], ToolPlan]:
    return _registering(TOOL_PLANS, tool_name, "scripted plans for the tool")


def _registering(table: dict[str, Any], key: str, what: str) -> Callable[[Any], Any]:
    def register(function: Any) -> Any:
        if key in table:
            raise ValueError(f"two {what} {key}")
        table[key] = function
        return function
    return register


def load() -> None:
    """Import every writer module (once)."""
    global _loaded
    if _loaded:
        return
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    _loaded = True


def writer_for(name: str, schema: dict[str, Any] | None) -> Writer | None:
    load()
    title = schema.get("title") if isinstance(schema, dict) else None
    if isinstance(title, str) and title in WRITERS:
        return WRITERS[title]
    return next((writer for contract, writer in WRITERS.items() if name == contract.replace("@", "-")), None)


def tool_plans() -> dict[str, ToolPlan]:
    load()
    return TOOL_PLANS

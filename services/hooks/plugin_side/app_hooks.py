"""The app hooks of the Python hookspecs the hooks service calls besides system_prompt, on_error and
provide_tools (services/hooks/plugin_side/hookspec_adapter.py has those):

| hook                  | event      | what its answer does                                                   |
|-----------------------|------------|------------------------------------------------------------------------|
| provide_model_options | PreLLMCall | the call's model: `ModelOptions.model`, else `.slot` (a gateway slot)   |
| build_tape_context    | PostContextAssembly | the runtime's conversation: `select` over it as a tape, `render` each |
| provide_tape_sidecar  | message:sent | told of the turn's player message and story, as tape entries          |
| provide_steering_inbox | PreStep   | drained into the run before each step, as Interject's messages          |

Impls are called in pluggy's order; the first answer that is not None wins; one that raises or answers
the wrong type is logged and skipped (PluginAgentHooks' rules).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.logs import get_logger
from shared.plugin_sdk.agent_plugins import RAISED, PluginAgentHooks
from shared.plugin_sdk.hookspecs import ModelOptions, TapeContext
from shared.plugin_threads import call_plugin_code

log = get_logger(component="hookspecs")


async def model_choice(hooks: PluginAgentHooks, session_id: str) -> str | None:
    """provide_model_options(session_id, workspace=None): the model (or slot) this session's calls use, the
    gateway's model_override ("provider:model" or a slot name); None: the runtime's own slot."""
    for impl in hooks.impls("provide_model_options"):
        outcome = await hooks.call("provide_model_options", impl, session_id=session_id, workspace=None)
        if outcome is None or outcome is RAISED:
            continue
        if not isinstance(outcome, ModelOptions) or not (outcome.model or outcome.slot):
            hooks.wrong_type("provide_model_options", impl, outcome, "ModelOptions with a model or a slot, or None")
            continue
        if outcome.temperature is not None or outcome.max_tokens is not None:
            log.warning("hookimpl.ignored", plugin_id=hooks.plugin_id, hook="provide_model_options",
                        field="temperature/max_tokens", why="PreLLMCall can change the model only")
        return outcome.model or outcome.slot
    return None


@dataclass(frozen=True)
class MessagesTape:
    """A tape over a runtime's assembled conversation (the store's log as the runtime reads it): read-only."""

    name: str
    messages: tuple[dict[str, Any], ...]

    def entries(self) -> Sequence[dict[str, Any]]:
        return [dict(message) for message in self.messages]


async def tape_context(hooks: PluginAgentHooks, session_id: str, messages: list[Any]) -> list[Any] | None:
    """The first build_tape_context answer applied to the conversation: `select(tape)`, then `render(entry)` of
    each; None: unchanged. What select or render raises, or an entry that is not a message, is logged and skipped."""
    for impl in hooks.impls("build_tape_context"):
        outcome = await hooks.call("build_tape_context", impl)
        if outcome is None or outcome is RAISED:
            continue
        if not isinstance(outcome, TapeContext):
            hooks.wrong_type("build_tape_context", impl, outcome, "TapeContext")
            continue
        tape = MessagesTape(session_id, tuple(m for m in messages if isinstance(m, dict)))
        try:
            entries = list(await call_plugin_code(outcome.select, tape)) if outcome.select else list(tape.entries())
            rendered = [await call_plugin_code(outcome.render, entry) for entry in entries] if outcome.render else entries
        except Exception as error:  # plugin code: logged and skipped (spec)
            hooks.wrong_type("build_tape_context", impl, error, "select/render that do not raise")
            continue
        if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in rendered):
            hooks.wrong_type("build_tape_context", impl, rendered, "messages ({role, content})")
            continue
        return rendered
    return None


def sidecars(hooks: PluginAgentHooks) -> list[Any]:
    """provide_tape_sidecar, called once when the plugin loads: the sidecars with an on_append."""
    return hooks.provided("provide_tape_sidecar", having=("on_append",), expected="TapeSidecar (on_append)")


async def tell_sidecars(found: list[Any], plugin_id: str, tape: str, entries: list[dict[str, Any]]) -> None:
    """Each entry appended to the session's tape, to each sidecar; what one raises is logged and skipped."""
    for sidecar in found:
        for entry in entries:
            try:
                await call_plugin_code(sidecar.on_append, tape, entry)
            except Exception as error:  # plugin code: logged and skipped (spec)
                log.warning("hookimpl.raised", plugin_id=plugin_id, hook="provide_tape_sidecar",
                            error=f"{type(error).__name__}: {error}")


def inboxes(hooks: PluginAgentHooks) -> list[Any]:
    """provide_steering_inbox, called once when the plugin loads: the inboxes with a drain."""
    return hooks.provided("provide_steering_inbox", having=("drain",), expected="SteeringInbox (drain)")


async def drained(found: list[Any], plugin_id: str, session_id: str) -> list[str]:
    """What each inbox holds for the session (MessagesPending), as texts: an envelope's `content`, or a string."""
    texts: list[str] = []
    for inbox in found:
        try:
            waiting = await call_plugin_code(inbox.drain, session_id)
            if inspect.isawaitable(waiting):
                waiting = await waiting
        except Exception as error:  # plugin code: logged and skipped (spec)
            log.warning("hookimpl.raised", plugin_id=plugin_id, hook="provide_steering_inbox", error=f"{type(error).__name__}: {error}")
            continue
        for message in waiting or []:
            text = message.get("content") if isinstance(message, dict) else message
            if isinstance(text, str) and text.strip():
                texts.append(text)
    return texts

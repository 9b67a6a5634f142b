"""admit_message (spec: python-hookspecs, App Hooks): a message submitted while the session's turn runs is
queued for its own turn, merged into the running turn as steering, or refused.

The scheduler's submit asks the hooks service (AdmitMessage) when it meets a running turn and one of the
session's active plugins implements the hook (GetSubscriptions' admitting_plugin_ids):

- `admit` (here): the plugins in the session's plugin order (paused ones and community plugins
  not approved are not asked), each bounded by ADMIT_TIMEOUT_S; the first decision wins.
- `decide` (the plugin's hookspec adapter, in its sandbox worker when sandboxed: plugin_side/admission.py): its
  impls in pluggy order; the first AdmitDecision wins, None asks the next.

An impl that raises or answers something else than an AdmitDecision, or a plugin that does not answer in
time, is logged and skipped: no decision from any plugin means queue (the submit waits, as it always did).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from services.hooks.common.admission_terms import ACTIONS, HOOK
from services.hooks.common.bounds import ADMIT_TIMEOUT_S
from shared.logs import get_logger

log = get_logger(component="hookspecs")
# A refusal's reason is shown to the player; a plugin's long text is cut.
MAX_REASON = 500

# An adapter's admit_message(session_id, message, turn): {action, reason} or None.
AdmitCall = Callable[[str, dict[str, Any], dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Admission:
    """The decision for one submit: "queue" unless a plugin said otherwise (`plugin_id` then names it)."""

    action: str = "queue"
    reason: str = ""
    plugin_id: str = ""


def _decision(plugin_id: str, answer: Any) -> Admission | None:
    """A plugin's answer as an Admission (None: no decision, or one that is not data we can read)."""
    if answer is None:
        return None
    action = answer.get("action") if isinstance(answer, dict) else None
    if action not in ACTIONS:
        log.warning("hookimpl.wrong_return_type", plugin_id=plugin_id, hook=HOOK, returned=type(answer).__name__,
                    expected="{action, reason}")
        return None
    reason = str(answer.get("reason") or "").strip()[:MAX_REASON]
    return Admission(action, reason or ("no reason given" if action == "refuse" else ""), plugin_id)


async def admit(asked: Sequence[tuple[str, AdmitCall]], session_id: str, message: dict[str, Any],
                turn: dict[str, Any]) -> Admission:
    """Each plugin (in order) until one decides; a plugin that raises or overruns ADMIT_TIMEOUT_S is skipped."""
    for plugin_id, admit_message in asked:
        try:
            answer = await asyncio.wait_for(admit_message(session_id, message, turn), ADMIT_TIMEOUT_S)
        except TimeoutError:
            log.warning("hookimpl.timeout", plugin_id=plugin_id, hook=HOOK, timeout_s=ADMIT_TIMEOUT_S)
            continue
        except Exception as error:  # plugin code, or its worker gone: skipped (spec)
            log.warning("hookimpl.raised", plugin_id=plugin_id, hook=HOOK, error=f"{type(error).__name__}: {error}")
            continue
        decided = _decision(plugin_id, answer)
        if decided is not None:
            log.info("admission.decided", session_id=session_id, plugin_id=plugin_id, action=decided.action)
            return decided
    return Admission()


def admitting_plugins(loaded: Sequence[Any]) -> list[str]:
    """The loaded plugins whose hookspec objects implement admit_message (GetSubscriptions tells the scheduler)."""
    return [plugin.entry.plugin_id for plugin in loaded if plugin.hookspecs is not None and HOOK in plugin.hookspecs.implemented()]


def asked_in_order(loaded: Sequence[Any], active: Sequence[str], approved: set[str], paused: set[str]) -> list[tuple[str, AdmitCall]]:
    """Who AdmitMessage asks: the session's active plugins implementing the hook, in the session's plugin order;
    not a paused one (fault breaker), nor a community plugin whose server code the player has not approved."""
    by_id = {plugin.entry.plugin_id: plugin for plugin in loaded}
    asked = []
    for plugin_id in dict.fromkeys(active):
        plugin = by_id.get(plugin_id)
        if plugin is None or plugin.hookspecs is None or HOOK not in plugin.hookspecs.implemented() or plugin_id in paused:
            continue
        if plugin.entry.source == "community" and plugin_id not in approved:
            continue
        asked.append((plugin_id, plugin.hookspecs.admit_message))
    return asked

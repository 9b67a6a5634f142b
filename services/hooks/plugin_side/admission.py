"""admit_message (spec: python-hookspecs, App Hooks), where the plugin's code runs: `decide` asks one plugin's
impls in pluggy order; the first AdmitDecision wins, None asks the next. The hooks service asks the plugins in
order and reads their answers (services/hooks/admission.py).
"""

from __future__ import annotations

from typing import Any

from services.hooks.common.admission_terms import ACTIONS, HOOK
from shared.plugin_sdk.agent_plugins import RAISED, PluginAgentHooks
from shared.plugin_sdk.app_types import AdmitDecision, TurnSnapshot


def snapshot(session_id: str, turn: dict[str, Any]) -> TurnSnapshot:
    """The running turn as the hook gets it (request fields: turn_id, step, pending)."""
    return TurnSnapshot(session_id=session_id, turn_id=str(turn.get("turn_id") or ""), running=True,
                        step=int(turn.get("step") or 0), pending=int(turn.get("pending") or 0))


async def decide(hooks: PluginAgentHooks, session_id: str, message: dict[str, Any], turn: TurnSnapshot) -> dict[str, str] | None:
    """One plugin's impls in pluggy order: the first AdmitDecision as {action, reason}; None when none decided."""
    for impl in hooks.impls(HOOK):
        outcome = await hooks.call(HOOK, impl, session_id=session_id, message=dict(message), turn=turn)
        if outcome is None or outcome is RAISED:
            continue
        if not isinstance(outcome, AdmitDecision) or outcome.action not in ACTIONS:
            hooks.wrong_type(HOOK, impl, outcome, "AdmitDecision (queue(), steer(), refuse(reason)) or None")
            continue
        return {"action": outcome.action, "reason": str(outcome.reason or "")}
    return None


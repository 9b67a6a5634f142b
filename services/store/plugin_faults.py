"""The fault breaker, kept with the session so every hooks replica counts together.

A hooks replica reports the handler faults of each dispatch (raised, timed out, returned an invalid
result; an abort or veto is the plugin doing its job and is not reported). Past `threshold` faults
of one plugin within the window, its hooks pause for the session: the scheduler reads the pauses with
each turn's lease (Session.paused_plugins) and tells the hooks service which plugins not to run, so
the turn whose fault tripped the breaker runs on with its plugin set and the pause starts with the
next one. ResetPluginFaults lifts a pause and forgets the plugin's faults.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.database import lock_session
from services.store.models import utcnow
from services.store.proto_mapping import pause_to_proto
from shared.hook_events import HANDLER_FAULTS


def counted(state: dict[str, Any], fault: store_pb2.PluginFault, now_s: float, threshold: int, window_s: float,
            turn_id: str) -> tuple[dict[str, Any], bool]:
    """One plugin's breaker state after `fault`, and whether the fault paused it."""
    if "paused" in state or fault.status not in HANDLER_FAULTS:
        return state, False
    window = [at for at in state.get("at", []) if at >= now_s - window_s] + [now_s]
    if len(window) < threshold:
        return {"at": window}, False
    reason = (f"{len(window)} hook faults within {window_s:.0f} s (last: {fault.status}: {fault.message}); "
              "its hooks are paused for this session until reset")
    return {"paused": {"reason": reason[:2000], "faults": len(window), "pausedAt": now_s, "turnId": turn_id}}, True


def record(db: Session, request: store_pb2.RecordPluginFaultsRequest) -> list[store_pb2.PluginPause]:
    row = lock_session(db, request.session_id)
    states = dict(row.plugin_faults or {})
    now_s = utcnow().timestamp()
    paused = []
    for fault in request.faults:
        states[fault.plugin_id], tripped = counted(states.get(fault.plugin_id) or {}, fault, now_s, request.threshold,
                                                   request.window_ms / 1000, request.turn_id)
        if tripped:
            paused.append(pause_to_proto(fault.plugin_id, states[fault.plugin_id]["paused"]))
    row.plugin_faults = states
    db.flush()
    return paused


def reset(db: Session, session_id: str, plugin_id: str) -> bool:
    row = lock_session(db, session_id)
    states = dict(row.plugin_faults or {})
    was_paused = "paused" in (states.pop(plugin_id, None) or {})
    row.plugin_faults = states
    db.flush()
    return was_paused

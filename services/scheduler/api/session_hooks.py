"""SessionStart and SessionEnd: hook events of a session, with no turn to carry their trace."""

from __future__ import annotations

from covel.store.v1 import store_pb2
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.hooks.payloads import SessionEnd, SessionStart
from shared.logs import get_logger

log = get_logger(component="scheduler")


async def dispatch_session_event(hooks: HookBus, record: SessionStart | SessionEnd, session: store_pb2.Session) -> None:
    """Dispatch the session's event `record`; its failed handlers go to the log."""
    dispatched = await hooks.dispatch(record, ExecutionScope(session=session, turn_id="", logical_turn=0))
    for entry in dispatched.trace:
        if entry.status not in ("ok", "abort"):
            log.warning("hook.failed", hook_event=entry.event, plugin_id=entry.handler_plugin_id, message=entry.message)

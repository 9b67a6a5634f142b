"""The scheduler's side of gateway event keys: it is "the gateway" of the spec (the
client-facing host), so it produces the keys, and the hooks service runs their handlers.

Each key is emitted with its delivery (shared/plugin_sdk/event_keys.py): awaited (the call
waits for the handlers), observed (a background task, the caller goes on) or bounded (the
call waits at most the budget; handlers keep running in the hooks service). A key no active
plugin subscribes to costs no call. A failed emission is logged and never fails the operation
that produced it. Context fields follow the spec's names; what this system does not know is
left out, never made up.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from typing import Any

import grpc
from google.protobuf import json_format
from pydantic_settings import BaseSettings

from covel.common.v1 import common_pb2
from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.catalogue import Runtime
from services.scheduler.known_sessions import KnownSessions
from services.scheduler.player_message import render_player_message
from shared.logs import get_logger
from shared.plugin_sdk.event_keys import KEYS_BY_NAME, Delivery, matches
from shared.settings import CovelSettings, DataDirSetting, PeerAddresses
from shared.structs import from_struct, to_struct

log = get_logger(component="event_keys")
SUBSCRIPTIONS_TTL_S = 5.0
# Awaited emissions: a guard against a lost hooks service, not a budget (each handler has its own timeout).
# The producer stops waiting after it even when handlers with longer timeouts still run (docs/event-hooks.md).
AWAITED_DEADLINE_S = 60.0
# A scheduler that starts before the hooks service waits this long for it (wait_for_ready).
HOOKS_START_WAIT_S = 30.0
# The channel the scheduler's clients reach it on: its gRPC API.
CHANNEL_ID = "grpc"
_PROCESS_STARTED = time.monotonic()
SECRET_NAME = re.compile(r"token|secret|password|key|cert|credential", re.IGNORECASE)


class EventKeySettings(CovelSettings):
    """COVEL_SCHEDULER_SHUTDOWN_HOOK_BUDGET_MS, COVEL_SCHEDULER_PRE_RESTART_HOOK_BUDGET_MS."""

    scheduler_shutdown_hook_budget_ms: int = KEYS_BY_NAME["gateway:shutdown"].budget_ms
    scheduler_pre_restart_hook_budget_ms: int = KEYS_BY_NAME["gateway:pre-restart"].budget_ms


# A session, or its id (fetched only when a subscriber needs it), or None for gateway events.
Session = store_pb2.Session | str | None


def public_cfg(settings: BaseSettings) -> dict[str, Any]:
    """The settings a handler may read as `cfg`: anything naming a credential is left out."""
    values = settings.model_dump(mode="json")
    return {name: value for name, value in values.items() if not SECRET_NAME.search(name)}


def session_entry(session: store_pb2.Session) -> dict[str, Any]:
    return json_format.MessageToDict(session)


class SchedulerEventKeys:
    def __init__(
        self,
        hooks: hooks_pb2_grpc.HookDispatcherStub,
        store: store_pb2_grpc.TransactionalStoreStub,
        cfg: dict[str, Any],
        settings: EventKeySettings | None = None,
        sessions: KnownSessions | None = None,
    ) -> None:
        self._hooks = hooks
        self._store = store
        # Sessions as this replica's turns found them: a turn's own events read no session from the store.
        self._sessions = sessions if sessions is not None else KnownSessions()
        # The spec's `cfg`: the scheduler's settings (addresses and limits; no secrets live there).
        self._cfg = cfg
        self._settings = settings or EventKeySettings()
        self._subscriptions: list[tuple[str, str]] = []
        self._fetched_at = float("-inf")
        self._lock = asyncio.Lock()
        self._observed: set[asyncio.Task] = set()
        self._serving_at: float | None = None

    # Subscriptions and the three deliveries

    async def _subscribers(self, key: str, *, wait_for_ready: bool = False, deadline: float | None = None) -> set[str]:
        """Plugins with a handler for the key or its family (the table is cached for a few seconds). A
        refresh ends by `deadline` (loop time) when given: TimeoutError."""
        if time.monotonic() - self._fetched_at > SUBSCRIPTIONS_TTL_S:
            async with asyncio.timeout_at(deadline), self._lock:
                if time.monotonic() - self._fetched_at > SUBSCRIPTIONS_TTL_S:
                    reply = await self._hooks.ListEventKeys(
                        hooks_pb2.ListEventKeysRequest(), timeout=HOOKS_START_WAIT_S if wait_for_ready else None, wait_for_ready=wait_for_ready
                    )
                    self._subscriptions = [(sub.plugin_id, sub.key) for sub in reply.subscriptions]
                    self._fetched_at = time.monotonic()
        return {plugin for plugin, sub in self._subscriptions if matches(sub, key)}

    def refresh(self) -> None:
        self._fetched_at = float("-inf")

    async def emit(
        self,
        key: str,
        context: dict[str, Any],
        session: Session = None,
        *,
        delivery: Delivery | None = None,
        budget_ms: int | None = None,
        wait_for_ready: bool = False,
    ) -> hooks_pb2.EmitEventResponse | None:
        """Emit one key with its delivery (a custom key: awaited unless told otherwise). Returns the
        reply for awaited and bounded keys once the wait is over; None for observed keys, keys
        nobody listens to, and failed emissions."""
        known = KEYS_BY_NAME.get(key)
        delivery = delivery or (known.delivery if known else Delivery.AWAITED)
        if delivery is Delivery.OBSERVED:
            task = asyncio.create_task(self._send(key, context, session, None, wait_for_ready))
            self._observed.add(task)
            task.add_done_callback(self._observed.discard)
            return None
        budget = budget_ms if budget_ms is not None else (known.budget_ms if known and delivery is Delivery.BOUNDED else None)
        return await self._send(key, context, session, budget if delivery is Delivery.BOUNDED else None, wait_for_ready)

    def emit_nowait(self, key: str, context: dict[str, Any], session: Session = None) -> None:
        """Emit from code that cannot wait (an observed key, or a stream being closed)."""
        task = asyncio.create_task(self.emit(key, context, session))
        self._observed.add(task)
        task.add_done_callback(self._observed.discard)

    async def _send(self, key: str, context: dict[str, Any], session: Session, budget_ms: int | None,
                    wait_for_ready: bool) -> hooks_pb2.EmitEventResponse | None:
        loop = asyncio.get_running_loop()
        # A bounded key: one deadline for the whole wait, a subscription refresh and session read included.
        deadline = loop.time() + budget_ms / 1000 if budget_ms else None
        try:
            try:
                subscribers = await self._subscribers(key, wait_for_ready=wait_for_ready, deadline=deadline)
            except TimeoutError:
                log.warning("event_key.budget_passed", key=key, budget_ms=budget_ms, why="the subscription refresh used it all")
                return None
            if not subscribers:
                return None
            if isinstance(session, str):
                # Read only now that someone listens: most emissions cost nothing.
                session = await self._session(session)
            if session is not None and not subscribers.intersection(session.active_plugins):
                return None
            # What is left of the budget (at least 1 ms: the handlers still start, nobody waits for them).
            left_ms = max(1, int((deadline - loop.time()) * 1000)) if deadline is not None else 0
            request = hooks_pb2.EmitEventRequest(key=key, context=to_struct(context), wait_budget_ms=left_ms)
            if session is not None:
                request.session.CopyFrom(hooks_pb2.HookContext(
                    session_id=session.id, locale=session.locale, active_plugin_ids=list(session.active_plugins),
                    approved_plugin_ids=list(session.approved_plugins),
                ))
            # A bounded wait is bounded here too: the call's deadline cuts the call, never the handlers.
            # Awaited keys: at most AWAITED_DEADLINE_S, a guard against a lost hooks service.
            timeout = left_ms / 1000 + 0.5 if deadline is not None else AWAITED_DEADLINE_S
            reply = await self._hooks.EmitEvent(request, timeout=timeout, wait_for_ready=wait_for_ready)
        except grpc.aio.AioRpcError as error:
            log.warning("event_key.emit_failed", key=key, code=error.code().name, details=error.details())
            return None
        for entry in reply.trace:
            if entry.status != "ok":
                log.warning("event_key.handler_failed", key=key, plugin_id=entry.handler_plugin_id, status=entry.status,
                            message=entry.message)
        if not reply.completed:
            log.info("event_key.budget_passed", key=key, budget_ms=budget_ms, handlers=reply.handler_count)
        return reply

    async def observed_done(self) -> None:
        """Wait for observed emissions still in flight (tests; shutdown)."""
        while self._observed:
            await asyncio.wait(set(self._observed))

    # Emission points

    async def command_new(self, session: store_pb2.Session, parent: store_pb2.Session) -> None:
        """A new session asked for from an existing one with emitCommandHooks (a /new command), not
        every create; the parent is previousSessionEntry. Gateway callers omit senderId."""
        await self.emit("command:new", {"sessionEntry": session_entry(session), "previousSessionEntry": session_entry(parent),
                                        "commandSource": "gateway:sessions.create", "cfg": self._cfg}, session)

    async def command_reset(self, session: store_pb2.Session, previous: store_pb2.Session) -> None:
        """ResetSession: the successor session exists; the replaced one is previousSessionEntry."""
        await self.emit("command:reset", {"sessionEntry": session_entry(session), "previousSessionEntry": session_entry(previous),
                                          "commandSource": "gateway:sessions.reset", "cfg": self._cfg}, session)

    async def command_stop(self, session_id: str) -> None:
        """After Cancel told the running turn to stop (no hook reply is delivered)."""
        await self.emit("command:stop", {"sessionId": session_id, "commandSource": "gateway:sessions.cancel"}, session_id)

    async def session_patch(self, session: store_pb2.Session, patch: dict[str, Any]) -> None:
        await self.emit("session:patch", {"sessionEntry": session_entry(session), "patch": patch, "cfg": self._cfg}, session)

    def player_message(self, session_id: str, actions: list[common_pb2.PlayerAction], message_id: str) -> None:
        """message:received once a submit's actions are accepted, then message:preprocessed (validated and
        rendered into the message the runtimes read). Both observed: the turn does not wait."""
        sender = actions[0].seat_id if actions else "main"
        body = "\n".join(action.text for action in actions)
        rendered = render_player_message(actions)
        now = int(time.time() * 1000)
        ids = {"messageId": message_id} if message_id else {}

        async def both() -> None:
            session = await self._session_if_heard(("message:received", "message:preprocessed"), session_id)
            if session is None:
                return
            await self.emit("message:received", {"from": sender, "content": rendered, "channelId": CHANNEL_ID, "timestamp": now,
                                                 **ids}, session)
            await self.emit("message:preprocessed", {"channelId": CHANNEL_ID, "cfg": self._cfg, "from": sender, "senderId": sender,
                                                     "body": body, "bodyForAgent": rendered, "timestamp": now, **ids}, session)

        task = asyncio.create_task(both())
        self._observed.add(task)
        task.add_done_callback(self._observed.discard)

    async def _session_if_heard(self, keys: tuple[str, ...], session_id: str) -> store_pb2.Session | None:
        """The session, fetched once, when any plugin subscribes to one of the keys; else None."""
        try:
            heard = set()
            for key in keys:
                heard |= await self._subscribers(key)
            if not heard:
                return None
            return await self._session(session_id)
        except grpc.aio.AioRpcError as error:
            log.warning("event_key.emit_failed", keys=list(keys), code=error.code().name, details=error.details())
            return None

    async def _session(self, session_id: str) -> store_pb2.Session:
        """The session as its latest turn here found it, else as the store has it."""
        known = self._sessions.get(session_id)
        if known is not None:
            return known
        return (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=session_id))).session

    def message_sent(self, turn: store_pb2.Turn, success: bool, error: str = "") -> None:
        """A turn's story, handed to the client's stream (success) or not (the client went away)."""
        if not turn.narrative:
            return
        context: dict[str, Any] = {"to": turn.session_id, "content": turn.narrative, "success": success, "channelId": CHANNEL_ID,
                                   "turnId": turn.id}
        story = next((message for message in turn.messages if message.role == "story"), None)
        if story is not None and story.id:
            context["messageId"] = story.id
        if error:
            context["error"] = error
        self.emit_nowait("message:sent", context, turn.session_id)

    async def agent_bootstrap(self, session: store_pb2.Session, runtime: Runtime, workspace_dir: str,
                              files: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """agent:bootstrap: handlers may replace or extend the bootstrap files; what comes back is checked."""
        reply = await self.emit("agent:bootstrap", {"workspaceDir": workspace_dir, "bootstrapFiles": files, "cfg": self._cfg,
                                                    "sessionKey": session.id, "sessionId": session.id,
                                                    "agentId": runtime.runtime_id}, session)
        if reply is None:
            return files
        returned = from_struct(reply.context).get("bootstrapFiles")
        if not isinstance(returned, list):
            log.warning("event_key.bootstrap_files_dropped", why="bootstrapFiles is no longer a list")
            return files
        return [entry for entry in returned if _bootstrap_record(entry)]

    async def compact_before(self, session: store_pb2.Session, *, message_count: int, message_count_original: int,
                             token_count: int | None = None, token_count_original: int | None = None) -> None:
        """session:compact:before, awaited: call it right before a compaction job."""
        context = {"sessionId": session.id, "missingSessionKey": False, "messageCount": message_count,
                   "messageCountOriginal": message_count_original,
                   **_present(tokenCount=token_count, tokenCountOriginal=token_count_original)}
        await self.emit("session:compact:before", context, session)

    async def compact_after(self, session: store_pb2.Session, *, message_count: int, compacted_count: int,
                            token_count: int | None = None, summary_length: int | None = None, tokens_before: int | None = None,
                            tokens_after: int | None = None, first_kept_entry_id: str | None = None) -> None:
        """session:compact:after, awaited: call it once a compaction succeeded (not after a skipped or failed one)."""
        context = {"sessionId": session.id, "missingSessionKey": False, "messageCount": message_count,
                   "compactedCount": compacted_count,
                   **_present(tokenCount=token_count, summaryLength=summary_length, tokensBefore=tokens_before,
                              tokensAfter=tokens_after, firstKeptEntryId=first_kept_entry_id)}
        await self.emit("session:compact:after", context, session)

    # Service lifecycle

    def startup(self, addresses: PeerAddresses) -> None:
        """gateway:startup once the scheduler serves: scheduled, so it never delays binding; it
        waits for the hooks service to be reachable."""
        self._serving_at = time.monotonic()
        deps = {name: addresses.addr_of(name) for name in ("registry", "hooks", "gateway", "store")}
        context = {"cfg": self._cfg, "deps": deps, "workspaceDir": str(DataDirSetting().data_dir.resolve())}
        task = asyncio.create_task(self.emit("gateway:startup", context, wait_for_ready=True))
        self._observed.add(task)
        task.add_done_callback(self._observed.discard)

    def restart_expected_ms(self) -> int:
        """The estimate a restart announces: how long this process took to start serving."""
        started = self._serving_at if self._serving_at is not None else time.monotonic()
        return max(1, int((started - _PROCESS_STARTED) * 1000))

    async def shutting_down(self) -> None:
        """SIGTERM/SIGINT: gateway:shutdown; SIGHUP (restart): gateway:pre-restart first. Each waits at most its budget."""
        if restart.requested:
            expected = self.restart_expected_ms()
            await self.emit("gateway:pre-restart", {"reason": "restart", "restartExpectedMs": expected},
                            budget_ms=self._settings.scheduler_pre_restart_hook_budget_ms)
            await self.emit("gateway:shutdown", {"reason": "restart", "restartExpectedMs": expected},
                            budget_ms=self._settings.scheduler_shutdown_hook_budget_ms)
        else:
            await self.emit("gateway:shutdown", {"reason": "shutdown", "restartExpectedMs": None},
                            budget_ms=self._settings.scheduler_shutdown_hook_budget_ms)



class RestartRequest:
    """SIGHUP restarts the scheduler in place: the usual graceful stop (with gateway:pre-restart),
    then `python -m services.scheduler` re-executes itself, same pid and settings."""

    requested = False

    def listen(self) -> None:
        def on_sighup() -> None:
            self.requested = True
            os.kill(os.getpid(), signal.SIGTERM)

        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, on_sighup)

    def exec_if_requested(self) -> None:
        if self.requested:
            log.info("scheduler.restarting")
            os.execv(sys.executable, [sys.executable, "-m", "services.scheduler"])


restart = RestartRequest()


def _present(**fields: Any) -> dict[str, Any]:
    """Optional context fields: only those known (an unknown token count is absent, not zero)."""
    return {name: value for name, value in fields.items() if value is not None}


def _bootstrap_record(entry: Any) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(entry.get("path"), str):
        log.warning("event_key.bootstrap_record_dropped", why="a record needs name and path strings")
        return False
    if "content" in entry and not isinstance(entry["content"], str):
        log.warning("event_key.bootstrap_record_dropped", name=entry.get("name"), why="content must be a string")
        return False
    return True

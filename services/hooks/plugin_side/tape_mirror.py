"""provide_tape_store as a mirror (spec: python-hookspecs, "provide_tape_store"): a plugin's TapeStore gets a copy
of each session's tape; it never replaces the store service's log.

The store service keeps the conversation log and commits each turn in one transaction, so it stays the single
source of truth: the kernel never reads a plugin's TapeStore for a turn (`list_tapes` is the plugin's own). What
the mirror does, on the gateway key message:sent (after the turn's story was handed to the client):

| the plugin's `read(tape)`      | what is appended (tape = the session id)                                       |
|--------------------------------|--------------------------------------------------------------------------------|
| `None` (no tape yet)           | every earlier committed turn of the session, oldest first (the store's log), then this turn |
| a list holding this turn's id  | nothing (the turn is mirrored already)                                         |
| any other list                 | this turn: `{role: user, content, turn_id}`, `{role: story, content, turn_id, message_id}` |

Earlier turns come from COMMITTED_TURNS: in the hooks service a StoreTurns (the store's ListTurns,
services/hooks/store_turns.py); in a sandbox worker a WorkerTurns: the host answers a `turns` capability bound to
the session of the message:sent being handled (with_turns), so plugin code never holds the store's stub and reads no other session. Every call into the
plugin's store is bounded (STORE_CALL_TIMEOUT_S, the log's reading LOG_TIMEOUT_S); what raises, times out or
answers the wrong type is logged, reported to on_error (stage `provide_tape_store`) and skips that store for
this turn. A failed reading of the log appends nothing, so the next turn fills the tape again.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from services.hooks.common.committed_turns import COMMITTED_TURNS
from shared.logs import get_logger
from shared.plugin_sdk.agent_plugins import PluginAgentHooks
from shared.plugin_threads import call_plugin_code

log = get_logger(component="hookspecs")
HOOK = "provide_tape_store"
# One call of a plugin's read or append; a plain method that overruns keeps its plugin thread until it returns.
STORE_CALL_TIMEOUT_S = 5.0
# Reading a session's committed turns, every page.
LOG_TIMEOUT_S = 30.0
# Sessions whose mirroring is serialised (message:sent of consecutive turns may arrive together).
_LOCKS_LIMIT = 1024

OnFailure = Callable[[str, Exception], Awaitable[None]]


class MirrorFailed(Exception):
    """A tape store call that raised, timed out or answered the wrong type, or a log that could not be read."""


def turn_entries(turn_id: str, user: str, story: str, message_id: str | None) -> list[dict[str, Any]]:
    """A turn as tape entries (provide_tape_sidecar's too)."""
    return [{"role": "user", "content": user, "turn_id": turn_id},
            {"role": "story", "content": story, "turn_id": turn_id, "message_id": message_id}]


class WorkerTurns:
    """CommittedTurns in a sandbox worker: the host answers (with_turns, bound to the call's session)."""

    def __init__(self, ask_host: Callable[..., Awaitable[Any]]) -> None:
        self._ask_host = ask_host

    async def page(self, session_id: str, page_token: str) -> tuple[list[dict[str, Any]], str]:
        answer = await self._ask_host("turns", page_token)
        turns = answer.get("turns") if isinstance(answer, dict) else None
        return [turn for turn in turns or [] if isinstance(turn, dict)], str(answer.get("next") or "")


def tape_stores(hooks: PluginAgentHooks) -> list[Any]:
    """provide_tape_store, called once when the plugin loads: the stores with read and append (sync or async)."""
    return hooks.provided(HOOK, having=("read", "append"), expected="TapeStore or AsyncTapeStore (read, append)")


async def _bounded(store: Any, method: str, *args: Any) -> Any:
    async def run() -> Any:
        outcome = await call_plugin_code(getattr(store, method), *args)
        return await outcome if inspect.isawaitable(outcome) else outcome

    try:
        return await asyncio.wait_for(run(), STORE_CALL_TIMEOUT_S)
    except TimeoutError:
        raise MirrorFailed(f"{type(store).__name__}.{method} did not return within {STORE_CALL_TIMEOUT_S:g} s") from None
    except Exception as error:  # plugin code
        raise MirrorFailed(f"{type(store).__name__}.{method} raised {type(error).__name__}: {error}") from error


async def earlier_entries(tape: str, turn_id: str) -> list[dict[str, Any]]:
    """The session's committed turns before `turn_id` (all of them when it is not among them), as entries."""
    source = COMMITTED_TURNS.get()
    if source is None:
        raise MirrorFailed("the session's committed turns cannot be read here: the tape is filled at a later turn")

    async def read_all() -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        token = ""
        while True:
            turns, token = await source.page(tape, token)
            for turn in turns:
                if turn_id and turn.get("turn_id") == turn_id:
                    return entries
                entries.extend(turn_entries(str(turn.get("turn_id") or ""), str(turn.get("user") or ""),
                                            str(turn.get("story") or ""), turn.get("message_id")))
            if not token:
                return entries

    try:
        return await asyncio.wait_for(read_all(), LOG_TIMEOUT_S)
    except TimeoutError:
        raise MirrorFailed(f"the session's committed turns were not read within {LOG_TIMEOUT_S:g} s") from None
    except MirrorFailed:
        raise
    except Exception as error:  # the store, or the sandbox's host
        raise MirrorFailed(f"the session's committed turns could not be read: {type(error).__name__}: {error}") from error


class TapeMirror:
    """One plugin's tape stores, each given a copy of every session's tape."""

    def __init__(self, hooks: PluginAgentHooks, on_failure: OnFailure) -> None:
        self.plugin_id = hooks.plugin_id
        self.stores = tape_stores(hooks)
        self._on_failure = on_failure
        self._locks: OrderedDict[str, asyncio.Lock] = OrderedDict()

    def _lock(self, tape: str) -> asyncio.Lock:
        lock = self._locks.pop(tape, None) or asyncio.Lock()
        self._locks[tape] = lock
        while len(self._locks) > _LOCKS_LIMIT:
            self._locks.popitem(last=False)
        return lock

    async def mirror(self, tape: str, turn_id: str, entries: list[dict[str, Any]]) -> None:
        """message:sent: this turn's entries to every store (its tape filled first when it has none)."""
        if not self.stores or not tape:
            return
        read: list[list[dict[str, Any]]] = []

        async def earlier() -> list[dict[str, Any]]:
            # The log is read once for every store that has no tape yet.
            if not read:
                read.append(await earlier_entries(tape, turn_id))
            return read[0]

        async with self._lock(tape):
            for store in self.stores:
                try:
                    await self._mirror_one(store, tape, turn_id, entries, earlier)
                except MirrorFailed as error:
                    log.warning("tape_mirror.failed", plugin_id=self.plugin_id, hook=HOOK, session_id=tape, error=str(error))
                    await self._on_failure(HOOK, error)

    async def _mirror_one(self, store: Any, tape: str, turn_id: str, entries: list[dict[str, Any]],
                          earlier: Callable[[], Awaitable[list[dict[str, Any]]]]) -> None:
        existing = await _bounded(store, "read", tape)
        if existing is not None and not isinstance(existing, (list, tuple)):
            raise MirrorFailed(f"{type(store).__name__}.read returned {type(existing).__name__}, not a list of entries or None")
        if existing and _mirrored(existing, entries):
            return
        if not turn_id:
            raise MirrorFailed("this turn's TurnStart was not seen by this hooks service: its entries are not known")
        if existing is None:
            entries = [*await earlier(), *entries]
        for entry in entries:
            await _bounded(store, "append", tape, dict(entry))


def _mirrored(existing: Any, entries: list[dict[str, Any]]) -> bool:
    """Whether the tape holds this turn already (its id, or its story's message id: a message:sent told twice)."""
    story = entries[-1]
    wanted = {("turn_id", story.get("turn_id")), ("message_id", story.get("message_id"))} - {("turn_id", ""), ("message_id", None)}
    return any(isinstance(entry, dict) and (key, entry.get(key)) in wanted for entry in existing for key in ("turn_id", "message_id"))

"""provide_tape_store as a mirror (services/hooks/plugin_side/tape_mirror.py), loaded from a real entry module: each turn's entries
appended on message:sent, a new tape first filled from the committed turns, failures bounded, logged and reported."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.hooks.common.committed_turns import COMMITTED_TURNS
from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from services.hooks.plugin_side import tape_mirror
from services.hooks.store_turns import StoreTurns, with_turns
from shared.plugin_sdk.event_keys import InternalEvent

pytestmark = pytest.mark.asyncio(loop_scope="session")

STORES = '''
import asyncio

from shared.plugin_sdk.hookspecs import hookimpl

ERRORS = []


class MemoryTapes:
    """A TapeStore (plain methods)."""

    def __init__(self):
        self.tapes = {}

    def list_tapes(self):
        return sorted(self.tapes)

    def read(self, tape):
        return list(self.tapes[tape]) if tape in self.tapes else None

    def append(self, tape, entry):
        self.tapes.setdefault(tape, []).append(entry)


class AsyncTapes(MemoryTapes):
    """An AsyncTapeStore."""

    async def read(self, tape):
        return super().read(tape)

    async def append(self, tape, entry):
        super().append(tape, entry)


class Broken(MemoryTapes):
    def read(self, tape):
        raise RuntimeError("disk gone")


class Hanging(MemoryTapes):
    async def read(self, tape):
        await asyncio.sleep(3600)


SYNC, ASYNC, BROKEN, HANGING = MemoryTapes(), AsyncTapes(), Broken(), Hanging()


class Stores:
    @hookimpl
    def provide_tape_store(self):
        return SYNC

    @hookimpl
    def on_error(self, stage, error, message):
        ERRORS.append((stage, str(error)))


class AsyncStores:
    @hookimpl
    def provide_tape_store(self):
        return ASYNC


class BrokenStores:
    @hookimpl
    def provide_tape_store(self):
        return BROKEN


class NotAStore:
    @hookimpl
    def provide_tape_store(self):
        return 42


def register(covel):
    for stores in (Stores(), AsyncStores(), BrokenStores(), NotAStore()):
        covel.register_hookimpls(stores)
'''


class Turns:
    """CommittedTurns over a list of (turn id, user, story), `size` a page; counts the pages read."""

    def __init__(self, turns: list[tuple[str, str, str]], size: int = 2) -> None:
        self.turns = [{"turn_id": t, "user": user, "story": story, "message_id": f"m-{t}"} for t, user, story in turns]
        self.size = size
        self.pages: list[tuple[str, str]] = []

    async def page(self, session_id: str, page_token: str) -> tuple[list[dict[str, Any]], str]:
        self.pages.append((session_id, page_token))
        start = int(page_token or 0)
        end = start + self.size
        return self.turns[start:end], str(end) if end < len(self.turns) else ""


@pytest.fixture
def stores(tmp_path: Path):
    (tmp_path / "stores" / "server").mkdir(parents=True)
    (tmp_path / "stores" / "server" / "index.py").write_text(STORES)
    entry = PluginEntry("stores", tmp_path / "stores", "server/index.py", (("TurnStart", "normal"), ("PostRuntime", "normal")), "builtin")
    result = load_entries([entry], generation=1)
    assert result.errors == {}, result.errors
    module = __import__("sys").modules["covel_plugin_stores_g1.server.index"]
    [handler] = result.loaded[0].registrar.event_handlers
    table = HandlerTable(result.loaded[0].registrar.hooks, {"stores": "builtin"})
    return table, handler.handler, module


async def turn(table: HandlerTable, sent, turn_id: str, said: str, story: str, session: str = "s") -> None:
    """TurnStart of a turn, then its message:sent."""
    await dispatch(table, "TurnStart", ExecutionContext(session_id=session, turn_id=turn_id, locale="en",
                                                        active_plugin_ids=("stores",)), {"playerMessage": said, "actions": []})
    await sent(InternalEvent("message:sent", session, {"to": session, "content": story, "success": True, "messageId": f"m-{turn_id}"}))


def entries(*turns: tuple[str, str, str]) -> list[dict[str, Any]]:
    return [entry for t, user, story in turns for entry in tape_mirror.turn_entries(t, user, story, f"m-{t}")]


async def test_a_new_tape_is_filled_from_the_committed_turns_then_each_turn_is_appended_once(stores) -> None:
    table, sent, module = stores
    committed = Turns([("t1", "I wake.", "Dawn."), ("t2", "I rise.", "Noon."), ("t3", "I walk.", "Dusk."),
                       ("t4", "Later.", "A turn committed since.")])
    COMMITTED_TURNS.set(committed)
    await turn(table, sent, "t3", "I walk.", "Dusk.")
    # The turns before this one (not the one committed after it), then this one's entries from the turn itself.
    assert module.SYNC.tapes["s"] == entries(("t1", "I wake.", "Dawn."), ("t2", "I rise.", "Noon."), ("t3", "I walk.", "Dusk."))
    assert module.ASYNC.tapes["s"] == module.SYNC.tapes["s"], "an AsyncTapeStore gets the same tape"
    await sent(InternalEvent("message:sent", "s", {"to": "s", "content": "Dusk.", "success": True, "messageId": "m-t3"}))
    await turn(table, sent, "t4", "Later.", "A turn committed since.")
    assert module.SYNC.tapes["s"][6:] == entries(("t4", "Later.", "A turn committed since.")), "t3 once, then t4"
    assert committed.pages == [("s", ""), ("s", "2")], "the log is read only for the tape it did not have"
    # The raising store and the one that is not a store are skipped; the raising one is reported to on_error each turn.
    assert "s" not in module.BROKEN.tapes
    assert module.ERRORS and all(stage == "provide_tape_store" and "Broken.read raised RuntimeError: disk gone" in error
                                 for stage, error in module.ERRORS)


async def test_a_log_that_cannot_be_read_appends_nothing_and_the_next_turn_fills_the_tape(stores) -> None:
    table, sent, module = stores
    COMMITTED_TURNS.set(None)
    await turn(table, sent, "t1", "I wake.", "Dawn.", session="late")
    assert "late" not in module.SYNC.tapes
    assert any("cannot be read here" in error for _, error in module.ERRORS)
    COMMITTED_TURNS.set(Turns([("t1", "I wake.", "Dawn."), ("t2", "I rise.", "Noon.")]))
    await turn(table, sent, "t2", "I rise.", "Noon.", session="late")
    assert module.SYNC.tapes["late"] == entries(("t1", "I wake.", "Dawn."), ("t2", "I rise.", "Noon."))


def mirror_of(store: Any) -> tuple[tape_mirror.TapeMirror, list[tuple[str, str]]]:
    """A TapeMirror of one store, with what it reports."""
    hooks = SimpleNamespace(plugin_id="stores", provided=lambda name, having, expected: [store])
    reported: list[tuple[str, str]] = []

    async def on_failure(stage: str, error: Exception) -> None:
        reported.append((stage, str(error)))

    return tape_mirror.TapeMirror(hooks, on_failure), reported  # type: ignore[arg-type]


async def test_a_store_that_hangs_is_given_up_on_within_its_bound(stores, monkeypatch) -> None:
    _, _, module = stores
    monkeypatch.setattr(tape_mirror, "STORE_CALL_TIMEOUT_S", 0.2)
    hanging, reported = mirror_of(module.HANGING)
    started = time.monotonic()
    await hanging.mirror("s", "t1", entries(("t1", "I wait.", "Nothing.")))
    assert time.monotonic() - started < 2
    assert reported == [("provide_tape_store", "Hanging.read did not return within 0.2 s")]


async def test_the_turns_capability_reads_only_the_bound_session_and_passes_others_on() -> None:
    committed = Turns([("t1", "a", "b")])
    COMMITTED_TURNS.set(committed)

    async def state(op: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return {"found": False, "op": op}

    capability = with_turns(state, "mine")
    assert await capability("turns", [""], {}) == {"turns": committed.turns, "next": ""}
    assert committed.pages == [("mine", "")], "the session is the event's, not one the worker names"
    assert await capability("state", ["get", "k", None], {}) == {"found": False, "op": "state"}
    with pytest.raises(LookupError):
        await capability("turns", ["", "other-session"], {})
    with pytest.raises(LookupError):
        await with_turns(None, "mine")("gateway", [], {})


async def test_store_turns_gives_the_committed_turns_with_a_story_as_message_sent_would() -> None:
    def turn_of(turn_id: str, status: store_pb2.TurnStatus.ValueType, narrative: str) -> store_pb2.Turn:
        return store_pb2.Turn(id=turn_id, status=status, player_message=f"said {turn_id}", narrative=narrative, messages=[
            common_pb2.Message(id=f"p-{turn_id}", role="player"), common_pb2.Message(id=f"m-{turn_id}", role="story")])

    class Store:
        requests: list[store_pb2.ListTurnsRequest] = []

        async def ListTurns(self, request: store_pb2.ListTurnsRequest) -> store_pb2.ListTurnsResponse:  # noqa: N802
            self.requests.append(request)
            return store_pb2.ListTurnsResponse(next_page_token="next", turns=[
                turn_of("t1", store_pb2.TURN_STATUS_COMMITTED, "Dawn."), turn_of("t2", store_pb2.TURN_STATUS_FAILED, ""),
                turn_of("t3", store_pb2.TURN_STATUS_ABORTED, ""), turn_of("t4", store_pb2.TURN_STATUS_COMMITTED, "Noon."), rewound])

    # A turn off the story's line (a rewind, a version not chosen) is not told again.
    rewound = turn_of("t5", store_pb2.TURN_STATUS_COMMITTED, "Dusk, rewound.")
    rewound.off_line = True

    store = Store()
    turns, token = await StoreTurns(store).page("s", "")  # type: ignore[arg-type]
    assert token == "next" and [turn["turn_id"] for turn in turns] == ["t1", "t4"]
    assert turns[0] == {"turn_id": "t1", "user": "said t1", "story": "Dawn.", "message_id": "m-t1"}
    assert store.requests[0].session_id == "s" and not store.requests[0].newest_first


async def test_turns_of_one_session_are_mirrored_one_after_another(stores) -> None:
    """message:sent of consecutive turns may be handled at once: the second waits for the first's fill of the tape,
    so nothing is appended twice and the tape keeps the turns' order."""
    _, _, module = stores

    class SlowTurns(Turns):
        async def page(self, session_id: str, page_token: str) -> tuple[list[dict[str, Any]], str]:
            await asyncio.sleep(0.1)
            return await super().page(session_id, page_token)

    COMMITTED_TURNS.set(SlowTurns([("t1", "One.", "First."), ("t2", "Two.", "Second."), ("t3", "Three.", "Third.")]))
    store = type(module.SYNC)()
    mirror, reported = mirror_of(store)
    await asyncio.gather(mirror.mirror("busy", "t2", entries(("t2", "Two.", "Second."))),
                         mirror.mirror("busy", "t3", entries(("t3", "Three.", "Third."))))
    assert store.tapes["busy"] == entries(("t1", "One.", "First."), ("t2", "Two.", "Second."), ("t3", "Three.", "Third."))
    assert reported == []

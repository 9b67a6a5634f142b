"""No partial commit: a builtin writer whose unit fails leaves none of its writes, through the real
store commit (one savepoint per non-story unit) and the five services with recorded model replies.

Two ways a unit fails here:
- its runtime fails after proposing writes (inventory/apply takes more coins than the player
  carries after adding the key; memory/extract saved one memory, then the provider failed);
- the store rejects one of its writes at commit: the fixture plugin `saboteur` (PreStateCommit,
  tests/fixtures/ownership) turns the last write of inventory/apply, affinity/apply,
  world-time/advance, dice-check/recorder and memory/extract into a record the dataset's schema
  refuses, so the store rolls that unit back and discards the writes before it too.
The story and the other units commit either way.
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from shared.settings import REPO_ROOT
from tests.e2e.recorded_model import RecordedModel, recorded, recorded_services
from tests.e2e.test_recorded_replies import ENGLISH, PLUGINS, TURN_1, WORLD, data, play, results, wait_for_memories
from tests.support.builtin_plugins import SETUP_PLUGINS

pytestmark = pytest.mark.asyncio(loop_scope="session")
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "ownership"
STOCKED = {"brass-lantern", "copper-coin", "worn-map"}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-partial"), [PLUGINS, FIXTURES], {"COVEL_RANDOM_SEED": "recorded"}) as (model, stub, store):
        yield model, stub, store


async def session(stub, extra: tuple[str, ...] = ()) -> str:
    request = scheduler_pb2.CreateSessionRequest(requested_plugins=list(extra), approved_plugins=list(extra), world_id=WORLD,
                                                 excluded_plugins=SETUP_PLUGINS)
    return (await stub.CreateSession(request)).session.id


async def settled(model: RecordedModel, calls: int) -> None:
    """Wait for the detached memory/extract job to make `calls` model calls and commit (or not)."""
    for _ in range(300):
        if len(model.of("memory/extract")) >= calls:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)


async def test_a_failed_runtime_commits_none_of_the_writes_it_made_before_failing(stack) -> None:
    model, stub, store = stack
    session_id = await session(stub)
    model.requests.clear()
    model.replies = {**ENGLISH, "inventory/ledger": [recorded("inventory-ledger-en-overdraw")],
                     "memory/extract": [recorded("memory-extract-en-1a"), recorded("provider-error-400")]}
    turn = await play(stub, session_id, TURN_1)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    apply = results(turn)["inventory/apply"]
    assert apply.status == resources_pb2.RUNTIME_STATUS_FAILED and "cannot take 5 x 'copper coin': the player carries 3" in apply.reason
    items = await data(store, session_id, "inventory", "items")
    assert set(items) == STOCKED and items["copper-coin"]["quantity"] == 3, "the key it added first did not commit"
    assert (await data(store, session_id, "affinity", "scores"))["tobin"]["score"] == 2, "the other units committed"

    # memory/extract saved two memories with its first call (the tool answered ok), then the provider failed.
    await settled(model, 2)
    saved = model.of("memory/extract")
    assert [r.step for r in saved] == [0, 1] and '"ok": true' in saved[1].body["messages"][-1]["content"]
    assert await data(store, session_id, "memory", "memories") == {}, "a failed extraction commits none of its upserts"


async def test_a_write_the_store_rejects_rolls_back_its_whole_unit(stack) -> None:
    model, stub, store = stack
    session_id = await session(stub, ("saboteur",))
    model.requests.clear()
    model.replies = {**ENGLISH, "affinity/judge": [recorded("affinity-judge-en-two")]}
    # A climb, so the roller rolls and the recorder writes a check and the tally.
    turn = await play(stub, session_id, "I climb onto the bar, pick up the rusty key and thank Old Tobin for the warm fire.")
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    ran = results(turn)
    for runtime_id in ("inventory/apply", "affinity/apply", "world-time/advance", "dice-check/recorder"):
        assert ran[runtime_id].status == resources_pb2.RUNTIME_STATUS_SUCCESS, (runtime_id, ran[runtime_id].reason)
    discarded = {unit.unit_runtime_id: unit.reason for unit in turn.discarded_units}
    # inventory/vocabulary published the items as apply left them: it read apply's writes, so it goes with them.
    assert discarded.pop("inventory/vocabulary") == "read data of inventory/apply that did not commit"
    assert set(discarded) == {"inventory/apply", "affinity/apply", "world-time/advance", "dice-check/recorder"}, discarded
    assert all("was rejected" in reason for reason in discarded.values()), discarded
    rejected = [o.reason for o in turn.proposal_outcomes if o.status == store_pb2.PROPOSAL_STATUS_REJECTED]
    assert sorted(reason.split(":")[1].strip() for reason in rejected) == ["dataset clock", "dataset items", "dataset scores", "dataset tally"]

    items = await data(store, session_id, "inventory", "items")
    assert set(items) == STOCKED and items["brass-lantern"]["equipped"] is False, "no rusty key: its set was in the rolled-back unit"
    assert await data(store, session_id, "affinity", "scores") == {}, "Old Tobin's score went with Mira's rejected one"
    assert await data(store, session_id, "world-time", "clock") == {}
    assert await data(store, session_id, "dice-check", "checks") == {} and await data(store, session_id, "dice-check", "tally") == {}
    assert turn.narrative.startswith("The key is cold"), "the story committed"

    await settled(model, 2)
    assert await data(store, session_id, "memory", "memories") == {}, "the first upsert went with the rejected second one"

    # Without the saboteur the same replies commit every unit (the test above is not vacuous).
    control = await session(stub)
    model.requests.clear()
    turn = await play(stub, control, "I climb onto the bar, pick up the rusty key and thank Old Tobin for the warm fire.")
    assert not turn.discarded_units, [(u.unit_runtime_id, u.reason) for u in turn.discarded_units]
    assert "rusty-key" in await data(store, control, "inventory", "items")
    assert set(await data(store, control, "affinity", "scores")) == {"tobin", "mira"}
    assert set(await data(store, control, "dice-check", "checks")) == {"t1-1"}
    assert len(await wait_for_memories(store, control, 2)) == 2

"""Read dependencies and hard dependencies: a discarded unit discards its dependents, story/setup readers are kept."""

from __future__ import annotations

import grpc

from covel.store.v1 import store_pb2
from shared.structs import from_struct
from tests.store.helpers import (
    commit_turn,
    expect_error,
    new_session,
    outcomes_by_id,
    plugin_data,
    proposal,
    story_proposal,
    story_result,
    violated_fields,
)

COMMITTED = store_pb2.PROPOSAL_STATUS_COMMITTED
REJECTED = store_pb2.PROPOSAL_STATUS_REJECTED
DISCARDED = store_pb2.PROPOSAL_STATUS_DISCARDED


def depends(unit: str, needs=(), read_from=()) -> store_pb2.UnitDependencies:
    return store_pb2.UnitDependencies(unit_runtime_id=unit, needs=list(needs), read_from=list(read_from))


def write(runtime: str, key: str, namespace: str = "n") -> store_pb2.Proposal:
    return proposal("plugin.data", {"namespace": namespace, "key": key, "value": runtime}, runtime_id=runtime)


async def test_discard_propagates_to_readers_and_hard_dependents_but_keeps_the_story(stub):
    session = await new_session(stub)
    producer_ok = write("producer", "p")
    producer_bad = proposal("plugin.data", {"namespace": "_reserved", "key": "x", "value": 1}, runtime_id="producer")
    reader = write("reader", "r")
    chained = write("chained", "c")  # needs reader
    second_reader = write("second", "s")  # read reader's writes
    bystander = write("bystander", "b")  # read nothing of them
    quiet = "quiet"  # no proposals of its own, needs producer: discarded too, and reported
    story = story_proposal("The story goes on.")
    dependencies = [
        depends("reader", read_from=["producer"]),
        depends("chained", needs=["reader"]),
        depends("second", read_from=["reader"]),
        depends("narrator", read_from=["producer"], needs=["reader"]),
        depends(quiet, needs=["producer"]),
    ]
    # Dependents listed before their producer: the store orders producers first.
    items = [reader, chained, second_reader, story, producer_ok, producer_bad, bystander]
    reply = await commit_turn(stub, session.id, items, story="", dependencies=dependencies)
    turn = reply.turn
    outcomes = outcomes_by_id(turn)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED
    assert outcomes[producer_bad.id].status == REJECTED and outcomes[producer_ok.id].status == DISCARDED
    assert (outcomes[reader.id].status, outcomes[reader.id].reason, outcomes[reader.id].code) == (
        DISCARDED, "read data of producer that did not commit", "read-dependency")
    assert outcomes[chained.id].reason == "needs reader that did not commit"
    assert outcomes[second_reader.id].reason == "read data of reader that did not commit"
    assert outcomes[story.id].status == COMMITTED and outcomes[bystander.id].status == COMMITTED
    assert len(outcomes) == len(items)
    discarded = {unit.unit_runtime_id: unit.reason for unit in turn.discarded_units}
    assert set(discarded) == {"producer", "reader", "chained", "second", "quiet"}
    assert discarded["quiet"] == "needs producer that did not commit"
    assert discarded["producer"].startswith(f"proposal {producer_bad.id} (plugin.data) was rejected")
    kept = [from_struct(entry) for entry in turn.trace if from_struct(entry).get("code") == "read-dependency.kept"]
    assert {(entry["unit"], entry["producer"], entry["dependency"]) for entry in kept} == {("narrator", "producer", "read"), ("narrator", "reader", "needs")}
    assert await plugin_data(stub, session.id) == {("n", "b"): "bystander"}
    assert [message.text for message in turn.messages][-1] == "The story goes on."
    # Stored with the turn.
    fetched = (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session.id, turn_id=turn.id))).turn
    assert fetched.discarded_units == turn.discarded_units and fetched.trace == turn.trace


async def test_setup_readers_are_kept_and_a_failed_runtime_discards_its_readers(stub):
    session = await new_session(stub)
    results = [
        story_result(),
        store_pb2.RuntimeResult(runtime_id="setup-rt", plugin_id="memory", status="success", setup=True),
        store_pb2.RuntimeResult(runtime_id="flaky", plugin_id="memory", status="failed", reason="timeout"),
    ]
    flaky = write("flaky", "f")
    setup = write("setup-rt", "s")
    reader = write("reader", "r")
    reply = await commit_turn(
        stub, session.id, [flaky, setup, reader], runtime_results=results,
        dependencies=[depends("setup-rt", read_from=["flaky"]), depends("reader", read_from=["flaky"])],
    )
    outcomes = outcomes_by_id(reply.turn)
    assert (outcomes[flaky.id].status, outcomes[flaky.id].code) == (DISCARDED, "runtime-failed")
    assert outcomes[setup.id].status == COMMITTED
    assert outcomes[reader.id].reason == "read data of flaky that did not commit"
    assert any(from_struct(entry).get("unit") == "setup-rt" for entry in reply.turn.trace)


async def test_a_rejected_write_in_a_setup_unit_fails_the_turn(stub):
    session = await new_session(stub)
    results = [story_result(), store_pb2.RuntimeResult(runtime_id="setup-rt", plugin_id="memory", status="success", setup=True)]
    bad = proposal("plugin.data", {"namespace": "_x", "key": "k", "value": 1}, runtime_id="setup-rt")
    reply = await commit_turn(stub, session.id, [bad], runtime_results=results)
    assert reply.turn.status == store_pb2.TURN_STATUS_FAILED
    assert {unit.unit_runtime_id for unit in reply.turn.discarded_units} == {"narrator", "setup-rt"}


async def test_dependency_cycles_and_self_references_are_invalid(stub):
    for dependencies, field in (
        ([depends("a", needs=["b"]), depends("b", read_from=["a"])], "dependencies"),
        ([depends("a", needs=["a"])], "dependencies[0].needs[0]"),
        ([depends("a"), depends("a")], "dependencies[1].unit_runtime_id"),
    ):
        session = await new_session(stub)
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, commit_turn(stub, session.id, [], dependencies=dependencies))
        assert violated_fields(error)[0].startswith(field)

"""Each proposal type and commit rule with its outcome, on both backends."""

from __future__ import annotations

from covel.store.v1 import store_pb2
from services.store.apply_context import VALUE_MAX_BYTES
from shared.plugin_data.operations import apply_operations
from shared.structs import from_struct, from_value, to_struct, to_value
from tests.store.helpers import commit_turn, new_session, outcomes_by_id, plugin_data, proposal, story_proposal, story_result

COMMITTED = store_pb2.PROPOSAL_STATUS_COMMITTED
REJECTED = store_pb2.PROPOSAL_STATUS_REJECTED
DISCARDED = store_pb2.PROPOSAL_STATUS_DISCARDED


def policy(namespace: str, schema=None, ops=(), plugin_id: str = "memory") -> store_pb2.DatasetPolicy:
    return store_pb2.DatasetPolicy(plugin_id=plugin_id, namespace=namespace, schema=to_struct(schema) if schema is not None else None, ops=list(ops))


async def test_batch_delete_and_update_write_in_order(stub):
    session = await new_session(stub)
    batch = proposal("plugin.data.batch", {"entries": [
        {"namespace": "notes", "key": "a", "value": {"hp": 10, "log": []}},
        {"namespace": "notes", "key": "b", "value": 1},
        {"namespace": "other", "key": "c", "value": None},
    ]})
    reply = await commit_turn(stub, session.id, [batch])
    assert outcomes_by_id(reply.turn)[batch.id].status == COMMITTED
    assert await plugin_data(stub, session.id) == {("notes", "a"): {"hp": 10, "log": []}, ("notes", "b"): 1, ("other", "c"): None}

    operations = [
        {"op": "inc", "path": "/hp", "by": -3},
        {"op": "append", "path": "/log", "value": "hit"},
        {"op": "merge", "value": {"status": "hurt"}},
        {"op": "upsertItem", "path": "/items", "value": {"id": "rope", "n": 1}},
    ]
    update = proposal("plugin.data.update", {"namespace": "notes", "key": "a", "operations": operations})
    fresh = proposal("plugin.data.update", {"namespace": "notes", "key": "new", "operations": [{"op": "inc", "path": "/count"}]})
    gone = proposal("plugin.data.delete", {"namespace": "notes", "key": "b"})
    gone_too = proposal("plugin.data.update", {"namespace": "other", "key": "c", "operations": [{"op": "delete"}]})
    never = proposal("plugin.data.delete", {"namespace": "notes", "key": "never-was"})
    reply = await commit_turn(stub, session.id, [update, fresh, gone, gone_too, never])
    assert {outcome.status for outcome in reply.turn.proposal_outcomes} == {COMMITTED}
    expected = apply_operations({"hp": 10, "log": []}, operations)
    assert await plugin_data(stub, session.id) == {("notes", "a"): expected, ("notes", "new"): {"count": 1}}
    assert expected == {"hp": 7, "log": ["hit"], "status": "hurt", "items": [{"id": "rope", "n": 1}]}


async def test_a_failing_operation_rejects_and_rolls_back_its_unit_only(stub):
    session = await new_session(stub)
    ok = proposal("plugin.data", {"namespace": "n", "key": "k", "value": {"gold": "lots"}})
    await commit_turn(stub, session.id, [ok])
    first = proposal("plugin.data", {"namespace": "n", "key": "other", "value": 1}, runtime_id="tracker")
    bad = proposal("plugin.data.update", {"namespace": "n", "key": "k", "operations": [{"op": "inc", "path": "/gold"}]}, runtime_id="tracker")
    unrelated = proposal("plugin.data", {"namespace": "n", "key": "kept", "value": 2}, runtime_id="recorder")
    reply = await commit_turn(stub, session.id, [first, bad, unrelated])
    outcomes = outcomes_by_id(reply.turn)
    assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED
    assert (outcomes[bad.id].status, outcomes[bad.id].code) == (REJECTED, "operation-failed")
    assert "operations[0] (inc)" in outcomes[bad.id].reason and "not a number" in outcomes[bad.id].reason
    assert (outcomes[first.id].status, outcomes[first.id].code) == (DISCARDED, "unit-rolled-back")
    assert outcomes[unrelated.id].status == COMMITTED
    assert [(unit.unit_runtime_id, "rejected" in unit.reason) for unit in reply.turn.discarded_units] == [("tracker", True)]
    assert await plugin_data(stub, session.id) == {("n", "k"): {"gold": "lots"}, ("n", "kept"): 2}


async def test_reserved_namespaces_except_the_plugins_own_hidden(stub):
    session = await new_session(stub)
    hidden = proposal("plugin.data", {"namespace": "_hidden.facts", "key": "secret", "value": "the keeper lies"}, plugin_id="lore", runtime_id="lore-rt")
    rejected = {}
    for namespace in ("_dimensions", "_dimension-settlements", "_memory", "_hidden._x", "_hidden."):
        item = proposal("plugin.data", {"namespace": namespace, "key": "k", "value": 1}, runtime_id=f"rt{namespace}")
        rejected[namespace] = item
    update = proposal("plugin.data.update", {"namespace": "_dimensions", "key": "k", "operations": [{"op": "set", "value": 1}]}, runtime_id="upd")
    delete = proposal("plugin.data.delete", {"namespace": "_kernel", "key": "k"}, runtime_id="del")
    reply = await commit_turn(stub, session.id, [hidden, *rejected.values(), update, delete])
    outcomes = outcomes_by_id(reply.turn)
    assert outcomes[hidden.id].status == COMMITTED
    for item in [*rejected.values(), update, delete]:
        assert (outcomes[item.id].status, outcomes[item.id].code) == (REJECTED, "reserved-namespace"), item.payload
    # Attributed to the proposing plugin: lore's hidden data, nobody else's.
    assert await plugin_data(stub, session.id) == {("_hidden.facts", "secret"): "the keeper lies"}
    assert await plugin_data(stub, session.id, plugin_id="lore") == {("_hidden.facts", "secret"): "the keeper lies"}


async def test_values_over_the_size_limit_are_rejected(stub):
    session = await new_session(stub)
    big = "x" * VALUE_MAX_BYTES
    too_big = proposal("plugin.data", {"namespace": "n", "key": "k", "value": big}, runtime_id="a")
    grows = proposal("plugin.data.update", {"namespace": "n", "key": "g", "operations": [
        {"op": "set", "path": "/a", "value": "y" * (VALUE_MAX_BYTES // 2)},
        {"op": "set", "path": "/b", "value": "y" * (VALUE_MAX_BYTES // 2)},
    ]}, runtime_id="b")
    fits = proposal("plugin.data", {"namespace": "n", "key": "ok", "value": "x" * 1000}, runtime_id="c")
    outcomes = outcomes_by_id((await commit_turn(stub, session.id, [too_big, grows, fits])).turn)
    assert (outcomes[too_big.id].code, outcomes[grows.id].code) == ("size-limit", "size-limit")
    assert str(VALUE_MAX_BYTES) in outcomes[too_big.id].reason
    assert outcomes[fits.id].status == COMMITTED


JOURNAL = {
    "type": "object",
    "required": ["id", "text"],
    "additionalProperties": False,
    "properties": {"id": {"type": "string"}, "text": {"type": "string", "maxLength": 20}, "mood": {"enum": ["calm", "tense"]}},
}


async def test_dataset_ops_and_record_schema(stub):
    session = await new_session(stub)
    datasets = [policy("journal", JOURNAL, ["upsertItem", "delete", "merge"]), policy("ledger", None), policy("free", {"type": "object"})]
    as_set = proposal("plugin.data", {"namespace": "journal", "key": "e1", "value": {"id": "e1", "text": "hi"}}, runtime_id="a")
    merge_ok = proposal("plugin.data.update", {"namespace": "journal", "key": "e2", "operations": [{"op": "merge", "value": {"id": "e2", "text": "fine"}}]}, runtime_id="b")
    merge_bad = proposal("plugin.data.update", {"namespace": "journal", "key": "e3", "operations": [
        {"op": "merge", "value": {"id": 3, "text": "far too long for twenty characters", "mood": "angry", "x": 1}},
    ]}, runtime_id="c")
    inc = proposal("plugin.data.update", {"namespace": "journal", "key": "e2", "operations": [{"op": "inc", "path": "/n"}]}, runtime_id="d")
    no_schema = proposal("plugin.data", {"namespace": "ledger", "key": "k", "value": {}}, runtime_id="e")
    hidden = proposal("plugin.data", {"namespace": "_hidden.journal", "key": "k", "value": "not a record"}, runtime_id="f")
    other_plugin = proposal("plugin.data", {"namespace": "journal", "key": "k", "value": 5}, plugin_id="someone-else", runtime_id="g")
    delete = proposal("plugin.data.delete", {"namespace": "journal", "key": "e9"}, runtime_id="h")
    reply = await commit_turn(stub, session.id, [as_set, merge_ok, merge_bad, inc, no_schema, hidden, other_plugin, delete], datasets=datasets)
    outcomes = outcomes_by_id(reply.turn)
    for item in (as_set, merge_bad, inc, no_schema):
        assert (outcomes[item.id].status, outcomes[item.id].code) == (REJECTED, "dataset-violation"), outcomes[item.id]
    assert "operation set is not allowed" in outcomes[as_set.id].reason
    assert "operation inc" in outcomes[inc.id].reason
    assert "no schema" in outcomes[no_schema.id].reason
    reason = outcomes[merge_bad.id].reason
    assert reason.count(": ") >= 3 and "(and 1 more)" in reason, reason  # 4 errors, 3 reported
    for item in (merge_ok, hidden, other_plugin, delete):
        assert outcomes[item.id].status == COMMITTED, outcomes[item.id]
    data = await plugin_data(stub, session.id, plugin_id="memory")
    assert data == {("journal", "e2"): {"id": "e2", "text": "fine"}, ("_hidden.journal", "k"): "not a record"}


async def test_a_dataset_violation_in_the_story_unit_fails_the_turn(stub):
    session = await new_session(stub)
    story = story_proposal("A story.")
    bad = proposal("plugin.data", {"namespace": "journal", "key": "k", "value": {"id": "k"}}, plugin_id="story-plugin", runtime_id="narrator")
    reply = await commit_turn(stub, session.id, [story, bad], story="", datasets=[policy("journal", JOURNAL, plugin_id="story-plugin")])
    assert reply.turn.status == store_pb2.TURN_STATUS_FAILED
    assert "dataset" in reply.turn.abort_reason
    outcomes = outcomes_by_id(reply.turn)
    assert outcomes[bad.id].code == "dataset-violation" and outcomes[story.id].code == "turn-rolled-back"
    assert reply.session.completed_player_turns == 0


async def test_character_schema_versions_and_upsert_cas(stub):
    session = await new_session(stub)
    schema = proposal("character.schema.set", {"types": ["player", "npc"], "attributes": {"hp": {"type": "number"}}}, plugin_id="world-init", runtime_id="init")
    create = proposal("character.upsert", {"characterId": "aya", "expectedVersion": 0, "character": {"type": "npc", "name": "Aya"}}, plugin_id="cast", runtime_id="cast")
    await commit_turn(stub, session.id, [schema, create])
    world = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
    assert world.character_schema_version == 1 and from_struct(world.character_schema)["types"] == ["player", "npc"]
    assert [(c.id, c.version, from_struct(c.data)["name"], c.plugin_id) for c in world.characters] == [("aya", 1, "Aya", "cast")]

    again = proposal("character.schema.set", {"types": ["player"], "attributes": {}}, plugin_id="world-init", runtime_id="init")
    stale = proposal("character.upsert", {"characterId": "aya", "expectedVersion": 0, "character": {"name": "X"}}, plugin_id="cast", runtime_id="c1")
    fresh = proposal("character.upsert", {"characterId": "aya", "expectedVersion": 1, "character": {"name": "Aya II"}}, plugin_id="cast", runtime_id="c2")
    wrong_type = proposal("character.upsert", {"characterId": "bo", "expectedVersion": 0, "character": {"type": "dragon"}}, plugin_id="cast", runtime_id="c3")
    outcomes = outcomes_by_id((await commit_turn(stub, session.id, [again, stale, fresh, wrong_type])).turn)
    assert (outcomes[stale.id].status, outcomes[stale.id].code) == (REJECTED, "version-conflict")
    assert outcomes[fresh.id].status == COMMITTED and outcomes[wrong_type.id].status == REJECTED
    world = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
    assert world.character_schema_version == 2
    assert [(c.id, c.version, from_struct(c.data)["name"]) for c in world.characters] == [("aya", 2, "Aya II")]


async def test_dimensions_trusted_owner_and_batch_cas(stub):
    session = await new_session(stub)
    clock = {"id": "clock", "name": "Clock", "schema": {"type": "integer", "minimum": 0}, "value": 0}
    mood = {"id": "mood", "name": "Mood", "schema": {"type": "string"}, "value": "calm"}
    untrusted = proposal("dimension.initialize", {"dimensions": [clock]}, plugin_id="rogue", runtime_id="rogue")
    init = proposal("dimension.initialize", {"dimensions": [clock, mood]}, plugin_id="world-init", runtime_id="init")
    outcomes = outcomes_by_id((await commit_turn(stub, session.id, [untrusted, init], dimension_owners=["world-init"])).turn)
    assert (outcomes[untrusted.id].code, outcomes[init.id].status) == ("untrusted-writer", COMMITTED)

    stale = proposal("dimension.update", {"updates": [{"id": "clock", "value": 5, "expectedVersion": 1}, {"id": "mood", "value": "tense", "expectedVersion": 7}]}, plugin_id="world-init", runtime_id="a")
    invalid = proposal("dimension.update", {"updates": [{"id": "clock", "value": -1, "expectedVersion": 1}]}, plugin_id="world-init", runtime_id="b")
    not_owner = proposal("dimension.update", {"updates": [{"id": "clock", "value": 1, "expectedVersion": 1}]}, plugin_id="other", runtime_id="c")
    settle = proposal("dimension.update", {"updates": []}, plugin_id="world-init", runtime_id="d")
    outcomes = outcomes_by_id((await commit_turn(stub, session.id, [stale, invalid, not_owner, settle], dimension_owners=["world-init", "other"])).turn)
    assert outcomes[stale.id].code == "version-conflict" and "nothing in the batch" in outcomes[stale.id].reason
    assert outcomes[invalid.id].code == "schema-violation"
    assert outcomes[not_owner.id].code == "untrusted-writer"
    assert outcomes[settle.id].status == COMMITTED

    good = proposal("dimension.update", {"updates": [{"id": "clock", "value": 5, "expectedVersion": 1}, {"id": "mood", "value": "tense", "expectedVersion": 1}]}, plugin_id="world-init", runtime_id="a")
    assert outcomes_by_id((await commit_turn(stub, session.id, [good], dimension_owners=["world-init"])).turn)[good.id].status == COMMITTED
    world = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
    assert [(d.id, from_value(d.value), d.version, d.owner_plugin_id) for d in world.dimensions] == [
        ("clock", 5, 2, "world-init"),
        ("mood", "tense", 2, "world-init"),
    ]
    plain = proposal("plugin.data", {"namespace": "_dimensions", "key": "clock", "value": 99}, plugin_id="world-init", runtime_id="x")
    assert outcomes_by_id((await commit_turn(stub, session.id, [plain])).turn)[plain.id].code == "reserved-namespace"


async def test_events_and_exports_are_recorded_with_the_turn(stub):
    session = await new_session(stub)
    emit = proposal("event.emit", {"name": "quest.started", "payload": {"quest": "lamp"}}, plugin_id="quests", runtime_id="q")
    export = proposal("export.record", {"recordAs": "latest-facts", "value": {"facts": ["a"]}}, plugin_id="memory", runtime_id="facts")
    lost_emit = proposal("event.emit", {"name": "never"}, plugin_id="x", runtime_id="broken")
    lost_export = proposal("export.record", {"recordAs": "broken", "value": 1}, plugin_id="x", runtime_id="broken")
    broken = proposal("plugin.data", {"namespace": "_nope", "key": "k", "value": 1}, plugin_id="x", runtime_id="broken")
    reply = await commit_turn(stub, session.id, [emit, export, lost_emit, lost_export, broken], trace=[{"code": "runtime.done", "runtimeId": "q"}])
    assert [(e.name, e.plugin_id, from_value(e.payload), e.seq) for e in reply.turn.events] == [("quest.started", "quests", {"quest": "lamp"}, 1)]
    exports = (await stub.ListExports(store_pb2.ListExportsRequest(session_id=session.id))).exports
    assert [(x.plugin_id, x.record_as, x.runtime_id, from_value(x.value), x.turn_id) for x in exports] == [
        ("memory", "latest-facts", "facts", {"facts": ["a"]}, reply.turn.id)
    ]
    assert [from_struct(entry) for entry in reply.turn.trace] == [{"code": "runtime.done", "runtimeId": "q"}]
    export2 = proposal("export.record", {"recordAs": "latest-facts", "value": {"facts": ["b"]}}, plugin_id="memory", runtime_id="facts")
    second = await commit_turn(stub, session.id, [export2])
    exports = (await stub.ListExports(store_pb2.ListExportsRequest(session_id=session.id, record_as="latest-facts"))).exports
    assert [(from_value(x.value), x.logical_turn) for x in exports] == [({"facts": ["b"]}, 2)]
    turns = (await stub.ListTurns(store_pb2.ListTurnsRequest(session_id=session.id))).turns
    assert [len(turn.events) for turn in turns] == [1, 0] and len(turns[0].trace) == 1
    fetched = (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session.id, turn_id=reply.turn.id))).turn
    assert fetched.events == reply.turn.events and fetched.discarded_units == reply.turn.discarded_units
    assert second.turn.status == store_pb2.TURN_STATUS_COMMITTED


async def test_unknown_types_and_malformed_payloads_are_rejected(stub):
    session = await new_session(stub)
    cases = [
        proposal("teleport", {}, runtime_id="a"),
        proposal("plugin.data.batch", {"entries": []}, runtime_id="b"),
        proposal("plugin.data.update", {"namespace": "n", "key": "k", "operations": []}, runtime_id="c"),
        proposal("plugin.data.update", {"namespace": "n", "key": "k", "operations": [{"op": "inc"}] * 101}, runtime_id="d"),
        proposal("character.upsert", {"characterId": "a", "character": {}}, runtime_id="e"),
        proposal("event.emit", {"name": ""}, runtime_id="f"),
        proposal("export.record", {"recordAs": "x"}, runtime_id="g"),
    ]
    outcomes = outcomes_by_id((await commit_turn(stub, session.id, cases, runtime_results=[story_result()])).turn)
    assert all(outcomes[item.id].status == REJECTED for item in cases), outcomes
    assert outcomes[cases[0].id].code == "unknown-type" and outcomes[cases[3].id].code == "size-limit"


async def test_a_worlds_own_dimensions_are_kept_by_its_trusted_owners(stub):
    """Dimensions a world wrote at session start (owner `world:<id>`) take updates from a trusted owner only."""
    world = store_pb2.SessionWorld(writer="world:cove", dimensions=[
        store_pb2.Dimension(id="tide", name="Tide", schema=to_struct({"enum": ["low", "high"]}), value=to_value("low"))])
    session = (await stub.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session(world_id="cove"), world=world))).session
    trusted = proposal("dimension.update", {"updates": [{"id": "tide", "value": "high", "expectedVersion": 1}]}, plugin_id="world-init", runtime_id="t")
    rogue = proposal("dimension.update", {"updates": [{"id": "tide", "value": "low", "expectedVersion": 1}]}, plugin_id="rogue", runtime_id="r")
    outcomes = outcomes_by_id((await commit_turn(stub, session.id, [rogue, trusted], dimension_owners=["world-init"])).turn)
    assert outcomes[rogue.id].code == "untrusted-writer" and outcomes[trusted.id].status == COMMITTED
    [tide] = (await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))).dimensions
    assert (from_value(tide.value), tide.version, tide.owner_plugin_id) == ("high", 2, "world:cove")

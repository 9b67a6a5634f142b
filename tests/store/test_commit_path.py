"""The commit's hot path: its reply is built from what it wrote (no reload), a write the database
refuses still falls on its own unit, and a commit's statements do not grow with its proposals."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from google.protobuf import json_format
from jsonschema.exceptions import SchemaError
from sqlalchemy import event
from sqlalchemy import inspect as sqlalchemy_inspect

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.store import apply_context, leases, sessions
from services.store.database import Database
from services.store.models import MessageRow, TurnEventRow, TurnRow
from services.store.proto_mapping import outcome_to_json
from services.store.records import EventRecord, MessageRecord, TurnRecord
from services.store.server import open_database
from services.store.turn_commit import commit_turn
from shared import json_schemas
from shared.plugin_data.operations import json_size
from shared.structs import from_value, to_struct
from tests.store.conftest import BACKENDS, drop_schema, postgres_reachable, settings_for
from tests.store.helpers import acquire, data_proposal, new_session, proposal, story_proposal, story_result, turn_for
from tests.store.helpers import commit_turn as commit_turn_rpc
from tests.support.json_payloads import PAYLOADS

COMMITTED, REJECTED, DISCARDED = store_pb2.PROPOSAL_STATUS_COMMITTED, store_pb2.PROPOSAL_STATUS_REJECTED, store_pb2.PROPOSAL_STATUS_DISCARDED


def test_outcomes_are_stored_as_their_protobuf_json():
    assert {field.name for field in store_pb2.ProposalOutcome.DESCRIPTOR.fields} == {"proposal_id", "status", "reason", "code"}, (
        "a new ProposalOutcome field: teach proto_mapping.outcome_to_json to store it")
    for outcome in (
        store_pb2.ProposalOutcome(proposal_id="p1", status=COMMITTED),
        store_pb2.ProposalOutcome(proposal_id="p2", status=REJECTED, reason="no «way»", code="dataset-violation"),
        store_pb2.ProposalOutcome(status=DISCARDED, code="unit-rolled-back"),
        store_pb2.ProposalOutcome(),
    ):
        assert outcome_to_json(outcome) == json_format.MessageToDict(outcome, preserving_proto_field_name=True)


def rich_turn(lease: store_pb2.TurnLease, idempotency_key: str = "") -> store_pb2.Turn:
    turn = turn_for(
        lease,
        idempotency_key=idempotency_key or f"key-{uuid.uuid4().hex[:8]}",
        runtime_results=[
            story_result(),
            store_pb2.RuntimeResult(runtime_id="tracker", plugin_id="tracker", status="success", output=to_struct({"count": 3, "ratio": 0.5})),
            store_pb2.RuntimeResult(runtime_id="quests", plugin_id="quests", status="success"),
        ],
        hook_trace=[common_pb2.HookTraceEntry(event="PreStateCommit", handler_plugin_id="judge", status="ok", duration_us=120)],
        trace=[to_struct({"code": "runtime.done", "runtimeId": "tracker", "ms": 12})],
        trace_id="0af7651916cd43dd8448eb211c80319c",
        actions=[common_pb2.PlayerAction(seat_id="seat-1", kind="say", text="Light the lamp.", source="player",
                                         fields=to_struct({"volume": 2, "mood": "calm", "tags": ["a", 1.5]}))],
    )
    turn.started_at.FromNanoseconds(1_700_000_000_123_456_789)
    turn.runtime_results[1].output.fields["n"].number_value = 7
    # A field of a newer scheduler's protos (999, a varint) in a result and an action: a read does
    # not know it, so neither does the reply.
    for item in (turn.runtime_results[1], turn.actions[0]):
        item.MergeFromString(b"\xb8\x3e\x01")
    assert b"\xb8\x3e\x01" in turn.SerializeToString()
    turn.proposal_outcomes.append(store_pb2.ProposalOutcome(proposal_id="vetoed-before", status=REJECTED, reason="a hook said no", code="hook-aborted"))
    return turn


async def test_the_commit_reply_is_what_get_turn_and_list_turns_read(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    items = [
        story_proposal("The lamp flickers.", segments=[{"text": "The lamp flickers."}]),
        data_proposal("notes", "count", {"n": 1}, plugin_id="tracker", runtime_id="tracker"),
        proposal("plugin.data.update", {"namespace": "notes", "key": "count", "operations": [{"op": "inc", "path": "/n"}]}, plugin_id="tracker", runtime_id="tracker"),
        proposal("event.emit", {"name": "quest.started", "payload": {"quest": "lamp", "step": 1}}, plugin_id="quests", runtime_id="quests"),
        proposal("event.emit", {"name": "quest.noted"}, plugin_id="quests", runtime_id="quests"),
        data_proposal("_kernel", "x", 1, plugin_id="rogue", runtime_id="rogue"),  # rejected: its unit is discarded
        proposal("export.record", {"recordAs": "facts", "value": {"facts": ["a"]}}, plugin_id="memory", runtime_id="facts"),
    ]
    reply = await stub.CommitTurn(store_pb2.CommitTurnRequest(
        session_id=session.id, lease_id=lease.lease_id, turn=rich_turn(lease), proposals=items, release_lease=True,
        detached_jobs=[store_pb2.DetachedJobSpec(plugin_id="memory", runtime_id="summarize")]))
    turn = reply.turn
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED and len(turn.messages) == 2 and len(turn.events) == 2
    assert [unit.unit_runtime_id for unit in turn.discarded_units] == ["rogue"] and len(turn.proposal_outcomes) == len(items) + 1
    fetched = (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session.id, turn_id=turn.id))).turn
    assert fetched == turn
    # == does not see unknown fields; the bytes do.
    assert fetched.SerializeToString(deterministic=True) == turn.SerializeToString(deterministic=True)
    assert (await stub.ListTurns(store_pb2.ListTurnsRequest(session_id=session.id))).turns[-1] == turn
    assert (await stub.GetSession(store_pb2.GetSessionRequest(session_id=session.id))).session == reply.session
    retried = await stub.CommitTurn(store_pb2.CommitTurnRequest(
        session_id=session.id, lease_id=lease.lease_id, turn=rich_turn(lease, idempotency_key=turn.idempotency_key), proposals=items))
    assert retried.turn == turn


async def test_a_write_the_database_refuses_falls_on_its_own_unit(store, stub):
    """PostgreSQL refuses NUL in text and JSON; the commit (which writes a turn's rows together)
    runs the turn again writing as it goes, so the refusal rejects the unit that made it. SQLite
    keeps such values."""
    refuses = store.settings.store_database_url.startswith("postgresql")
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    kept = data_proposal("notes", "mood", "calm", plugin_id="memory", runtime_id="recorder")
    nul_value = data_proposal("notes", "a", {"text": "x\u0000y"}, plugin_id="tracker", runtime_id="tracker")
    beside = data_proposal("notes", "b", 2, plugin_id="tracker", runtime_id="tracker")
    nul_event = proposal("event.emit", {"name": "quest.started", "payload": {"quest": "\u0000"}}, plugin_id="quests", runtime_id="quests")
    story = story_proposal("All is calm.")
    reply = await stub.CommitTurn(store_pb2.CommitTurnRequest(
        session_id=session.id, lease_id=lease.lease_id, turn=turn_for(lease, runtime_results=[story_result()]),
        proposals=[kept, nul_value, beside, nul_event, story], release_lease=True))
    outcomes = {outcome.proposal_id: outcome for outcome in reply.turn.proposal_outcomes}
    assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED
    assert (outcomes[kept.id].status, outcomes[story.id].status) == (COMMITTED, COMMITTED)
    if refuses:
        assert (outcomes[beside.id].status, outcomes[beside.id].code) == (REJECTED, "database-refused")
        assert "plugin data writes" in outcomes[beside.id].reason and outcomes[nul_value.id].code == "unit-rolled-back"
        assert (outcomes[nul_event.id].status, outcomes[nul_event.id].code) == (REJECTED, "database-refused")
        assert [unit.unit_runtime_id for unit in reply.turn.discarded_units] == ["tracker", "quests"] and not reply.turn.events
    else:
        assert {outcome.status for outcome in outcomes.values()} == {COMMITTED} and len(reply.turn.events) == 1
    entries = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries
    assert [entry.key for entry in entries] == (["mood"] if refuses else ["mood", "a", "b"])
    assert (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session.id, turn_id=reply.turn.id))).turn == reply.turn

    lease = (await acquire(stub, session.id)).lease
    nul_story = story_proposal("A\u0000B")
    reply = await stub.CommitTurn(store_pb2.CommitTurnRequest(
        session_id=session.id, lease_id=lease.lease_id, turn=turn_for(lease, runtime_results=[story_result()]),
        proposals=[data_proposal("notes", "c", 3), nul_story], release_lease=True))
    if refuses:
        assert reply.turn.status == store_pb2.TURN_STATUS_FAILED and "database refused" in reply.turn.abort_reason
        assert reply.session.completed_player_turns == 1 and not reply.turn.messages
    else:
        assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED
    messages = (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))).messages
    assert [message.seq for message in messages] == list(range(1, len(messages) + 1)) and len(messages) == (2 if refuses else 4)


@pytest_asyncio.fixture(params=BACKENDS)
async def database(request, tmp_path) -> AsyncIterator[Database]:
    if request.param == "postgres" and (reason := postgres_reachable()):
        pytest.skip(reason)
    settings, schema = settings_for(request.param, tmp_path)
    opened = await open_database(settings)
    try:
        yield opened
    finally:
        await opened.close()
        if schema:
            drop_schema(schema)


async def statements_of_a_commit(database: Database, session_id: str, per_unit: int, turn: int) -> int:
    """Statements a commit of 10 units of `per_unit` writes each (sets and updates) runs."""
    lease = (await database.write(leases.try_acquire, session_id, "test", 30_000, "")).lease
    items = [story_proposal(f"Turn {turn}.")]
    for unit in range(10):
        for index in range(per_unit):
            runtime = f"unit-{unit}"
            items.append(data_proposal("bench", f"{runtime}-{index}", {"turn": turn}, plugin_id="bench", runtime_id=runtime))
            items.append(proposal("plugin.data.update", {"namespace": "bench", "key": f"{runtime}-n{index}", "operations": [{"op": "inc", "path": "/n"}]},
                                  plugin_id="bench", runtime_id=runtime))
    request = store_pb2.CommitTurnRequest(session_id=session_id, lease_id=lease.lease_id, proposals=items, release_lease=True,
                                          turn=turn_for(lease, runtime_results=[story_result()]))
    statements: list[str] = []

    def count(_connection, _cursor, statement, *_rest) -> None:
        statements.append(statement)

    event.listen(database.engine, "before_cursor_execute", count)
    try:
        reply = await database.write(commit_turn, request)
    finally:
        event.remove(database.engine, "before_cursor_execute", count)
    assert {outcome.status for outcome in reply.turn.proposal_outcomes} == {COMMITTED}
    return len(statements)


async def test_a_commits_statements_do_not_grow_with_its_proposals(database):
    session = await database.write(sessions.create_session, store_pb2.Session(phase="playing", locale="en"))
    few = await statements_of_a_commit(database, session.id, per_unit=1, turn=1)
    many = await statements_of_a_commit(database, session.id, per_unit=20, turn=2)
    assert few == many <= 20, (few, many)


def test_a_schema_is_compiled_and_checked_once():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}
    first = json_schemas.checked_validator(schema)
    assert json_schemas.checked_validator(json.loads(json.dumps(schema))) is first, "the same schema, another object"
    schema["properties"]["n"]["minimum"] = 5  # the caller's dict changes afterwards: the cached validator does not
    assert first.is_valid({"n": 1}) and json_schemas.checked_validator(schema) is not first
    assert json_schemas.validator(schema) is json_schemas.validator(schema) is not json_schemas.checked_validator(schema)
    for _ in range(2):
        with pytest.raises(SchemaError, match="is not valid under any of the given schemas"):
            json_schemas.checked_validator({"type": "nonsense"})


async def test_commits_reuse_a_datasets_compiled_schema(stub):
    """The store runs in this process: the second commit with the same dataset compiles nothing."""
    schema = {"type": "object", "properties": {"mood": {"type": "string", "maxLength": 10}}, "required": ["mood"],
              "$comment": f"unique to this test: {uuid.uuid4()}"}
    policy = store_pb2.DatasetPolicy(plugin_id="memory", namespace="moods", schema=to_struct(schema))
    session = await new_session(stub)
    for number, value in enumerate(({"mood": "calm"}, {"mood": "far too long a mood"})):
        before = json_schemas._compiled_text.cache_info()
        reply = await commit_turn_rpc(stub, session.id, [data_proposal("moods", f"m{number}", value)], datasets=[policy])
        after = json_schemas._compiled_text.cache_info()
        assert after.misses - before.misses == (1 if number == 0 else 0)
    assert reply.turn.proposal_outcomes[-1].code == "dataset-violation"


@pytest.mark.parametrize("value", [{"text": "plain"}, "Zoë «quoted» 😀", [1, 2.5, None, {"a": "ü"}], None, 7])
def test_a_value_is_sized_by_the_text_it_is_written_as(value):
    text = apply_context.json_sized("a value", value)
    assert len(text.encode()) == json_size(value) and json.loads(text) == value


@pytest.mark.parametrize("letter", ["x", "ü", "😀"])
def test_the_size_limit_counts_utf8_bytes_of_the_written_text(letter):
    width = len(letter.encode())
    fits = letter * ((apply_context.VALUE_MAX_BYTES - 2) // width)  # 2: the quotes
    apply_context.json_sized("a value", fits)
    with pytest.raises(apply_context.Rejected, match="the limit is"):
        apply_context.json_sized("a value", fits + letter * (1 + (apply_context.VALUE_MAX_BYTES - 2) % width))


async def test_plugin_data_written_as_its_json_text_reads_back_as_the_value(stub):
    """Values are written as the JSON text their size check made: reads, and the next turn's
    updates (which read the stored value), see exactly the values written."""
    session = await new_session(stub)
    values = {f"v{index}": payload for index, payload in enumerate([*PAYLOADS, "Zoë 😀", 3, 2.5, None, True, [1, "two"]])}
    values["v0"] = {"x": "\"quoted\" \\ back\nslash"}
    written = await commit_turn_rpc(stub, session.id, [data_proposal("notes", key, value) for key, value in values.items()])
    entries = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries
    assert {entry.key: from_value(entry.value) for entry in entries} == {key: json.loads(json.dumps(value)) for key, value in values.items()}
    # Both times are the commit's (the turn's finished_at when the turn gives none).
    assert all(entry.created_at == entry.updated_at == written.turn.finished_at for entry in entries)
    update = proposal("plugin.data.update", {"namespace": "notes", "key": "v1", "operations": [{"op": "inc", "path": "/n"}]})
    reply = await commit_turn_rpc(stub, session.id, [update])
    assert reply.turn.proposal_outcomes[-1].status == COMMITTED
    entries = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries
    updated = next(entry for entry in entries if entry.key == "v1")
    assert from_value(updated.value) == {**values["v1"], "n": 4} and updated.created_at == written.turn.finished_at
    assert updated.updated_at == reply.turn.finished_at != written.turn.finished_at


@pytest.mark.parametrize(("record", "row"), [(TurnRecord, TurnRow), (MessageRecord, MessageRow), (EventRecord, TurnEventRow)])
def test_a_commits_records_have_their_tables_columns(record, row):
    """A column added to the table is a field the commit must write (and read back for its reply)."""
    assert [item.name for item in dataclasses.fields(record)] == [attribute.key for attribute in sqlalchemy_inspect(row).column_attrs]

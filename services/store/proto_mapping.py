"""Rows <-> protobuf messages.

Repeated sub-messages kept as JSON (actions, runtime results, trace, outcomes) are stored
as the protobuf JSON mapping with proto field names, so fields added to the protos later
round-trip without a migration.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

from google.protobuf import json_format, timestamp_pb2
from google.protobuf.message import Message as ProtoMessage

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.store.models import (
    DimensionSettlementRow,
    InteractionRow,
    MessageRow,
    PluginDataRow,
    SessionRow,
    TurnEventRow,
    TurnLeaseRow,
    TurnRow,
    TurnTraceRow,
)
from services.store.records import EventRecord, MessageRecord, TurnRecord
from services.store.seats import seats_to_proto
from shared.structs import from_struct, ints_back, to_struct, to_value

M = TypeVar("M", bound=ProtoMessage)

SESSION_STATUS = {"active": store_pb2.SESSION_STATUS_ACTIVE, "ended": store_pb2.SESSION_STATUS_ENDED}
TURN_STATUS = {
    "committed": store_pb2.TURN_STATUS_COMMITTED,
    "aborted": store_pb2.TURN_STATUS_ABORTED,
    "failed": store_pb2.TURN_STATUS_FAILED,
}
TURN_STATUS_NAME = {value: name for name, value in TURN_STATUS.items()}
PROPOSAL_STATUS_JSON = {value: name for name, value in store_pb2.ProposalStatus.items()}


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    """What Timestamp.FromDatetime makes (a naive time is UTC), from the time's distance to the epoch: a fifth of its
    CPU (it goes through a time tuple and calendar.timegm), and every row a read maps has one or two."""
    if value is None:
        return None
    since = value - (_EPOCH_NAIVE if value.tzinfo is None else _EPOCH)
    return timestamp_pb2.Timestamp(seconds=since.days * 86_400 + since.seconds, nanos=value.microsecond * 1_000)


_EPOCH, _EPOCH_NAIVE = datetime(1970, 1, 1, tzinfo=UTC), datetime(1970, 1, 1)


def from_timestamp(stamp: timestamp_pb2.Timestamp, present: bool) -> datetime | None:
    """A request's timestamp as an aware datetime, None when the caller left it unset."""
    return stamp.ToDatetime(tzinfo=UTC) if present else None


def messages_to_json(items: Iterable[ProtoMessage]) -> list[dict[str, Any]]:
    return [json_format.MessageToDict(item, preserving_proto_field_name=True) for item in items]


def outcome_to_json(outcome: store_pb2.ProposalOutcome) -> dict[str, Any]:
    """messages_to_json of one outcome, written out: a commit stores one per proposal, and
    MessageToDict costs ten times as much (a test holds the two equal)."""
    item: dict[str, Any] = {}
    if outcome.proposal_id:
        item["proposal_id"] = outcome.proposal_id
    if outcome.status:
        item["status"] = PROPOSAL_STATUS_JSON[outcome.status]
    if outcome.reason:
        item["reason"] = outcome.reason
    if outcome.code:
        item["code"] = outcome.code
    return item


def messages_from_json(kind: type[M], items: list[dict[str, Any]] | None) -> list[M]:
    return [json_format.ParseDict(item, kind(), ignore_unknown_fields=True) for item in items or []]


def exact_json(value: Any) -> str:
    """JSON text of a plugin's value with integral numbers as integers (what a Struct cannot say), keys sorted."""
    return json.dumps(ints_back(value), ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def turn_usage(results: Iterable[store_pb2.RuntimeResult]) -> store_pb2.TokenUsage | None:
    """The turn's runtimes' usage added up, with the largest context any of them filled; None: no model was called."""
    used = [result.usage for result in results if result.usage.calls]
    if not used:
        return None
    largest = max(used, key=lambda usage: usage.context_tokens)
    return store_pb2.TokenUsage(prompt_tokens=sum(u.prompt_tokens for u in used), completion_tokens=sum(u.completion_tokens for u in used),
                                calls=sum(u.calls for u in used), context_tokens=largest.context_tokens, context_window=largest.context_window)


def runtime_results_from_json(items: list[dict[str, Any]] | None) -> list[store_pb2.RuntimeResult]:
    results = messages_from_json(store_pb2.RuntimeResult, items)
    for result, item in zip(results, items or [], strict=True):
        if "output" in item:
            result.output_json = exact_json(item["output"])
    return results


def session_to_proto(row: SessionRow) -> store_pb2.Session:
    return store_pb2.Session(
        id=row.id,
        status=SESSION_STATUS.get(row.status, store_pb2.SESSION_STATUS_UNSPECIFIED),
        phase=row.phase,
        locale=row.locale,
        world_id=row.world_id,
        title=row.title,
        active_plugins=row.active_plugins,
        requested_plugins=row.requested_plugins,
        excluded_plugins=row.excluded_plugins,
        approved_plugins=row.approved_plugins,
        runtime_model_overrides=row.runtime_model_overrides,
        plugin_settings={plugin: to_struct(values) for plugin, values in row.plugin_settings.items()},
        setup_runtimes={runtime: to_struct(progress) for runtime, progress in (row.setup_runtimes or {}).items()},
        completed_player_turns=row.completed_player_turns,
        player_messages=row.player_messages or 0,
        recorded_turns=row.recorded_turns or 0,
        head_turn_id=row.head_turn_id or "",
        owner=row.owner,
        seats=seats_to_proto(row.seats),
        created_at=timestamp(row.created_at),
        updated_at=timestamp(row.updated_at),
        paused_plugins=[pause_to_proto(plugin_id, state["paused"]) for plugin_id, state in sorted((row.plugin_faults or {}).items())
                        if "paused" in state],
    )


def pause_to_proto(plugin_id: str, paused: dict[str, Any]) -> store_pb2.PluginPause:
    """A plugin's pause as plugin_faults.py keeps it ({reason, faults, pausedAt (epoch s), turnId})."""
    pause = store_pb2.PluginPause(plugin_id=plugin_id, reason=paused["reason"], faults=paused["faults"], turn_id=paused["turnId"])
    pause.paused_at.FromDatetime(datetime.fromtimestamp(paused["pausedAt"], UTC))
    return pause


WITNESSES = "presentCharacterIds"


def _witnesses(meta: Any) -> dict[str, Any] | None:
    return {WITNESSES: meta[WITNESSES]} if isinstance(meta, dict) and WITNESSES in meta else None


def message_to_proto(row: MessageRow | MessageRecord | Any, with_metadata: bool = True) -> common_pb2.Message:
    """A message row (ORM, record or a Core row with `meta`); `with_metadata=False` leaves its metadata out but for who
    was present (presentCharacterIds: a character's witnessed story is read from it)."""
    metadata = row.meta if with_metadata else _witnesses(row.meta)
    return common_pb2.Message(
        id=row.id,
        session_id=row.session_id,
        turn_id=row.turn_id or "",
        role=row.role,
        plugin_id=row.plugin_id,
        runtime_id=row.runtime_id,
        text=row.text,
        metadata=to_struct(metadata) if metadata is not None else None,
        created_at=timestamp(row.created_at),
        seq=row.seq,
    )


def turn_to_proto(
    row: TurnRow,
    messages: Iterable[MessageRow] = (),
    trace: TurnTraceRow | None = None,
    events: Iterable[TurnEventRow] = (),
    outcomes: Iterable[store_pb2.ProposalOutcome] | None = None,
) -> store_pb2.Turn:
    """`outcomes`: the row's proposal outcomes as messages already (a commit's reply), else read from the row."""
    results = runtime_results_from_json(row.runtime_results)
    return store_pb2.Turn(
        **_turn_row_fields(row, messages, events),
        trace=[to_struct(entry) for entry in trace.entries] if trace else [],
        discarded_units=messages_from_json(store_pb2.DiscardedUnit, trace.discarded_units) if trace else [],
        actions=messages_from_json(common_pb2.PlayerAction, row.actions),
        runtime_results=results,
        proposal_outcomes=messages_from_json(store_pb2.ProposalOutcome, row.proposal_outcomes) if outcomes is None else outcomes,
        hook_trace=messages_from_json(common_pb2.HookTraceEntry, row.hook_trace),
        usage=turn_usage(results),
    )


def _turn_row_fields(row: TurnRow | TurnRecord, messages: Iterable[MessageRow | MessageRecord],
                     events: Iterable[TurnEventRow | EventRecord]) -> dict[str, Any]:
    """The Turn fields read from the turn's own columns, its messages and its events, alike for a read and a commit's reply."""
    return {
        "id": row.id, "session_id": row.session_id, "logical_turn": row.logical_turn, "status": TURN_STATUS[row.status],
        "idempotency_key": row.idempotency_key or "", "player_message": row.player_message, "narrative": row.narrative,
        "abort_reason": row.abort_reason, "origin": row.origin, "trace_id": row.trace_id, "source_turn_id": row.source_turn_id or "", "retryable": bool(row.retryable),
        "parent_turn_id": row.parent_turn_id or "", "version_of": row.version_of or "", "off_line": bool(row.off_line),
        # Through the row's datetimes: stored to the microsecond, as a read returns them.
        "started_at": timestamp(row.started_at), "finished_at": timestamp(row.finished_at),
        "messages": [message_to_proto(message) for message in messages], "events": [event_to_proto(event) for event in events],
    }


def written_turn_to_proto(
    sent: store_pb2.Turn,
    row: TurnRecord,
    messages: Iterable[MessageRecord],
    added_trace: Iterable[dict[str, Any]],
    discarded_units: Iterable[store_pb2.DiscardedUnit],
    events: Iterable[EventRecord],
    outcomes: Iterable[store_pb2.ProposalOutcome],
) -> store_pb2.Turn:
    """turn_to_proto of a turn just written (CommitTurn's reply): the request's actions, runtime results,
    hook trace and trace entries as sent rather than parsed back from the JSON stored of them, which
    cost more than the commit's statements. `added_trace`: the entries the commit added after the
    sent ones. The same Turn a read returns (tests/store/test_commit_path.py holds them equal)."""
    reply = store_pb2.Turn(
        **_turn_row_fields(row, messages, events),
        trace=[*sent.trace, *(to_struct(entry) for entry in added_trace)],
        discarded_units=discarded_units,
        actions=sent.actions,
        runtime_results=sent.runtime_results,
        proposal_outcomes=outcomes,
        hook_trace=sent.hook_trace,
        usage=turn_usage(sent.runtime_results),
    )
    for result in reply.runtime_results:
        if result.HasField("output"):
            result.output_json = exact_json(from_struct(result.output))
    # A read knows only the fields of this store's protos.
    reply.DiscardUnknownFields()
    return reply


def event_to_proto(event: TurnEventRow | EventRecord) -> store_pb2.EmittedEvent:
    return store_pb2.EmittedEvent(name=event.name, plugin_id=event.plugin_id, runtime_id=event.runtime_id, payload=to_value(event.payload),
                                  seq=event.seq, payload_json=exact_json(event.payload))


def lease_to_proto(row: TurnLeaseRow) -> store_pb2.TurnLease:
    return store_pb2.TurnLease(
        lease_id=row.lease_id,
        session_id=row.session_id,
        turn_id=row.turn_id,
        logical_turn=row.logical_turn,
        deadline=timestamp(row.deadline),
        holder=row.holder,
        acquired_at=timestamp(row.acquired_at),
    )


def plugin_data_to_proto(row: PluginDataRow | Any) -> store_pb2.PluginDataEntry:
    """A plugin data row (ORM, or a Core row of the table)."""
    return store_pb2.PluginDataEntry(
        plugin_id=row.plugin_id,
        namespace=row.namespace,
        key=row.key,
        value=to_value(row.value),
        created_at=timestamp(row.created_at),
        updated_at=timestamp(row.updated_at),
        turn_id=row.turn_id or "",
    )


def settlement_to_proto(row: DimensionSettlementRow | Any) -> store_pb2.DimensionSettlement:
    """A settlement receipt (ORM, or a Core row of the table)."""
    return store_pb2.DimensionSettlement(
        source_turn_id=row.source_turn_id,
        source_logical_turn=row.source_logical_turn,
        plugin_id=row.plugin_id,
        runtime_id=row.runtime_id,
        status=row.status,
        last_error=row.last_error,
        attempts=row.attempts,
        resolved_turn_id=row.resolved_turn_id or "",
        created_at=timestamp(row.created_at),
        updated_at=timestamp(row.updated_at),
        input=to_struct(row.input),
    )


def interaction_to_proto(row: InteractionRow | Any) -> store_pb2.InteractionRecord:
    """An interaction as the session keeps it (ORM, or a Core row of the table)."""
    return store_pb2.InteractionRecord(
        interaction=json_format.ParseDict(row.interaction, store_pb2.Interaction(), ignore_unknown_fields=True),
        turn_id=row.turn_id,
        status=row.status,
        answer=None if row.answer is None else to_struct(row.answer),
        answered_turn_id=row.answered_turn_id or "",
        created_at=timestamp(row.created_at),
        answered_at=timestamp(row.answered_at),
    )

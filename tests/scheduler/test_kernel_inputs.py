"""turn-digest@1 and operations@1 as TurnState builds them from what the turn's runtimes did."""

from __future__ import annotations

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.execution.outcome import RuntimeOutcome
from services.scheduler.execution.story_output import normalize_story
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.hooks.bus import ExecutionScope
from services.scheduler.turn.activity import MAX_OPERATION_PART_CHARS, OperationNote, ToolCallNote
from services.scheduler.turn.state import TurnState
from tests.scheduler.compiled import compiled_manifest


def _scope(locale: str = "zh") -> ExecutionScope:
    return ExecutionScope(session=store_pb2.Session(id="s1", locale=locale), turn_id="t2", logical_turn=2)


def _state(history: list | None = None, manifests: dict | None = None, **fields) -> TurnState:
    return TurnState(TurnShared(history=history or [], packages={}, manifests=manifests or {}), **fields)


def test_only_finished_committable_visible_runtimes_count() -> None:
    run = _state(manifests={"p/hidden": compiled_manifest({"io": {"concealed": True}}, runtime_id="p/hidden")}, player_message="I look.",
                 actions=[common_pb2.PlayerAction(seat_id="main", kind="do", text="I look.", source="player")])
    run.outcomes = {"p/story": RuntimeOutcome("success", story=normalize_story("Rain.")), "p/ok": RuntimeOutcome("success"),
                    "p/failed": RuntimeOutcome("failed"), "p/hidden": RuntimeOutcome("success"),
                    "p/failed-story": RuntimeOutcome("failed", story=normalize_story("Never told."))}
    run.statuses = {runtime_id: outcome.status for runtime_id, outcome in run.outcomes.items()}
    run.activity.tool_calls += [ToolCallNote("p/ok", True, "p/ok called look({})"), ToolCallNote("p/ok", False, "p/ok called broken({})"),
                                ToolCallNote("p/failed", True, "p/failed called look({})"),
                                ToolCallNote("p/hidden", True, "p/hidden called secret({})"),
                                ToolCallNote("p/running", True, "p/running called look({})")]
    run.activity.operations += [OperationNote("p/ok", "notes.add@1", "added", {"text": "hi"}, {"id": "n1"}),
                                OperationNote("p/failed", "notes.add@1", "lost", {}, None),
                                OperationNote("p/running", "notes.add@1", "not yet", {}, None)]
    inputs = run.kernel_inputs(_scope())
    digest = inputs["turn-digest@1"]
    assert digest["narrativeText"] == "Rain.", "only successful stories"
    assert digest["toolCallSummaries"] == ["p/ok called look({})"]
    assert digest["locale"] == "zh" and digest["turnId"] == "t2"
    assert digest["actions"] == [{"seatId": "main", "kind": "do", "text": "I look.", "source": "player"}]
    assert inputs["operations@1"] == {"operations": [
        {"contract": "notes.add@1", "summary": "added", "request": {"text": "hi"}, "result": {"id": "n1"}}]}
    assert run.operation_units() == {"p/ok"}
    assert "locale" not in run.kernel_inputs(_scope(locale=""))["turn-digest@1"]


def test_the_digest_lists_the_lorebook_entries_the_successful_story_had() -> None:
    from services.scheduler.execution.framework_trace import framework_entry

    def used(*ids: str) -> common_pb2.HookTraceEntry:
        return framework_entry("lorebook.activated", "ok", "p/story", {"turn": 2, "entries": [
            {"owner": "world", "id": entry_id, "why": "constant", "tokens": 3, "position": "beforeChar"} for entry_id in ids]})

    run = _state(player_message="I look.")
    told, lost = RuntimeOutcome("success", story=normalize_story("Rain.")), RuntimeOutcome("failed", story=normalize_story("No."))
    told.trace, lost.trace = [used("salt", "lamp")], [used("never")]
    run.outcomes = {"p/story": told, "p/failed-story": lost, "p/other": RuntimeOutcome("success")}
    assert run.kernel_inputs(_scope())["turn-digest@1"]["lorebook"] == [
        {"owner": "world", "id": "salt", "why": "constant"}, {"owner": "world", "id": "lamp", "why": "constant"}]


def test_an_oversized_request_or_result_is_left_out_and_marked_truncated() -> None:
    note = OperationNote("p/ok", "notes.add@1", "added", {"text": "x" * (MAX_OPERATION_PART_CHARS + 1)}, {"ok": True})
    assert note.value() == {"contract": "notes.add@1", "summary": "added", "result": {"ok": True}, "truncated": True}


def test_last_player_input_is_this_turns_submission_or_the_latest_player_message() -> None:
    run = _state(player_message="I look.", player_input_id="in-1", started_at="2026-12-03T08:00:00Z",
                 actions=[common_pb2.PlayerAction(kind="do", text="I look.", source="player")])
    assert run.last_player_input(_scope()) == {"id": "in-1", "sessionId": "s1", "turnId": "t2", "formId": None,
                                               "values": {"text": "I look."}, "createdAt": "2026-12-03T08:00:00Z"}
    earlier = common_pb2.Message(id="m1", session_id="s1", turn_id="t1", role="player", text="Hello.")
    earlier.created_at.FromJsonString("2026-12-03T07:00:00Z")
    continuation = _state(history=[earlier, common_pb2.Message(role="story", text="Hi.")],
                          actions=[common_pb2.PlayerAction(kind="advance", source="system")])
    assert continuation.last_player_input(_scope()) == {"id": "m1", "sessionId": "s1", "turnId": "t1", "formId": None,
                                                        "values": {"text": "Hello."}, "createdAt": "2026-12-03T07:00:00Z"}
    assert _state().last_player_input(_scope()) is None


def test_an_operation_withdrawn_from_its_unit_is_left_out() -> None:
    run = _state()
    kept = {"namespace": "ledger", "key": "kept", "value": 1}
    run.outcomes = {"p/ok": RuntimeOutcome("success", foreign_writes=[{"pluginId": "svc", "type": "plugin.data", "payload": kept}])}
    run.activity.operations += [
        OperationNote("p/ok", "ledger@1", "kept", {}, None, staged=[("plugin.data", kept)]),
        # A failed nested run or subagent of p/ok staged this; its writes never reached p/ok's unit.
        OperationNote("p/ok", "ledger@1", "withdrawn", {}, None, staged=[("plugin.data", {"namespace": "ledger", "key": "lost"})]),
    ]
    assert [op["summary"] for op in run.kernel_inputs(_scope())["operations@1"]["operations"]] == ["kept"]


def test_kernel_inputs_are_built_only_for_a_runtime_that_declares_one() -> None:
    """They list every finished runtime: built for each of N runtimes they made a turn N²."""
    from types import SimpleNamespace

    run = _state(player_message="I look.")
    run.outcomes = {"p/ok": RuntimeOutcome("success")}
    run.statuses = {"p/ok": "success"}
    reader = compiled_manifest({"io": {"inputs": {"digest": {"from": {"kernel": "turn-digest@1"}}}}}, runtime_id="p/reader")
    assert run.runtime_scope(SimpleNamespace(runtime_id="p/reader"), reader, _scope()).kernel_inputs == run.kernel_inputs(_scope())
    plain = compiled_manifest(runtime_id="p/plain")
    assert run.runtime_scope(SimpleNamespace(runtime_id="p/plain"), plain, _scope()).kernel_inputs is None



def test_world_dimensions_are_the_snapshot_the_turn_found() -> None:
    from shared.structs import to_struct, to_value
    run = _state()
    assert run.kernel_inputs(_scope())["world.dimensions@1"] == {}
    run.shared.world = store_pb2.GetWorldResponse(dimensions=[
        store_pb2.Dimension(id="tide", name="Tide", schema=to_struct({"enum": ["low", "high"]}), value=to_value("low"), version=4)])
    run.shared.proposals.append(store_pb2.Proposal(type="dimension.update", plugin_id="keeper",
                                                   payload=to_struct({"updates": [{"id": "tide", "value": "high", "expectedVersion": 4}]})))
    # Committed values only: an upstream proposal shows in ctx.world.dimensions, never in the snapshot.
    assert run.kernel_inputs(_scope())["world.dimensions@1"] == {"tide": {"name": "Tide", "schema": {"enum": ["low", "high"]},
                                                                           "value": "low", "version": 4}}

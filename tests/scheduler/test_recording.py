"""What a finished runtime adds to its turn (turn/recording.py) and what a detached job carries (turn/detached_jobs.py)."""

from __future__ import annotations

from types import SimpleNamespace

from covel.store.v1 import store_pb2
from services.scheduler.execution.outcome import RuntimeOutcome
from services.scheduler.execution.story_output import normalize_story
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.turn.detached_jobs import SOURCE_TRACE, detached_job
from services.scheduler.turn.recording import record_outcome, unit_proposals
from services.scheduler.turn.state import TurnState
from shared.structs import from_struct
from tests.scheduler.compiled import compiled_manifest, compiled_package

FUNCTION = SimpleNamespace(runtime_id="p/f", plugin_id="p", type="function", stage="post-turn", visibility="system")
STORY = SimpleNamespace(runtime_id="p/story", plugin_id="p", type="agent", stage="narrative", visibility="story")
PROVIDES = compiled_manifest({"io": {"output": {"contract": "mood@1", "recordAs": "mood"}}}, runtime_id="p/f")


def test_a_unit_commits_story_writes_staged_changes_export_and_events_in_that_order() -> None:
    outcome = RuntimeOutcome(
        "success", story=normalize_story({"text": "Rain."}), writes=[{"type": "plugin.data.set", "payload": {"key": "k"}}],
        foreign_writes=[{"pluginId": "ledger", "type": "plugin.data.set", "payload": {"key": "gold"}}],
        events=[{"topic": "rained", "payload": {"mm": 3}}], output={"text": "Rain."},
    )
    proposals = unit_proposals(STORY, outcome, PROVIDES)
    assert [p.type for p in proposals] == ["narrative.append", "plugin.data.set", "plugin.data.set", "export.record", "event.emit"]
    assert {p.unit_runtime_id for p in proposals} == {"p/story"} and len({p.id for p in proposals}) == 5
    assert [p.plugin_id for p in proposals] == ["p", "p", "ledger", "p", "p"], "a write service's change is its own plugin's"
    assert from_struct(proposals[3].payload) == {"recordAs": "mood", "value": {"text": "Rain."}}
    assert from_struct(proposals[4].payload) == {"name": "rained", "payload": {"mm": 3}}


def test_a_function_without_a_value_records_no_export() -> None:
    assert unit_proposals(FUNCTION, RuntimeOutcome("success"), PROVIDES) == []
    [export] = unit_proposals(FUNCTION, RuntimeOutcome("success", canonical_value=0, has_value=True, output={"v": 0}), PROVIDES)
    assert from_struct(export.payload) == {"recordAs": "mood", "value": 0}, "the canonical value, not its projection"


def test_a_success_binds_downstream_and_satisfies_its_contract() -> None:
    run, turn = TurnState(TurnShared(history=[], packages={})), store_pb2.Turn(session_id="s")
    outcome = RuntimeOutcome("success", output={"v": 1}, canonical_value=1, has_value=True, read_from={"p/up"}, run_id="run",
                             events=[{"topic": "t"}])
    run.operation_reads = {"p/f": {"p/ops"}}
    record_outcome(FUNCTION, outcome, run, turn, PROVIDES)
    [result] = turn.runtime_results
    assert (result.runtime_id, result.status, result.run_id, result.story, result.setup) == ("p/f", "success", "run", False, False)
    assert run.outputs == {"p/f": {"v": 1}} and run.providers == {"mood@1": ["p/f"]} and run.satisfied == {"mood@1"}
    assert run.read_from == {"p/f": {"p/up", "p/ops"}} and run.emitted == [{"topic": "t", "source": "p/f"}]
    assert [p.type for p in run.shared.proposals] == ["export.record", "event.emit"]


def test_a_failure_is_noted_but_binds_and_commits_nothing() -> None:
    run, turn = TurnState(TurnShared(history=[], packages={})), store_pb2.Turn(session_id="s")
    record_outcome(FUNCTION, RuntimeOutcome("failed", "boom", writes=[{"type": "x", "payload": {}}]), run, turn, PROVIDES)
    assert run.statuses == {"p/f": "failed"} and turn.runtime_results[0].reason == "boom"
    assert not run.outputs and not run.shared.proposals and not run.satisfied


def test_a_guard_skip_binds_its_output_but_satisfies_no_contract() -> None:
    run, turn = TurnState(TurnShared(history=[], packages={})), store_pb2.Turn(session_id="s")
    record_outcome(FUNCTION, RuntimeOutcome("skipped", output={"v": 2}, canonical_value={"v": 2}, has_value=True, guard_skipped=True),
                   run, turn, PROVIDES)
    assert run.outputs == {"p/f": {"v": 2}} and run.providers == {"mood@1": ["p/f"]} and not run.satisfied


def test_a_detached_job_snapshots_turn_inputs_and_its_limits() -> None:
    package = compiled_package("p", {"p/a": {}, "p/job": {
        "io": {"inputs": {"mood": {"from": {"runtime": "p/a"}},
                          "ledger": {"from": {"runtime": "p/a"}, "scope": "committed", "recordAs": "gold"}}},
        "schedule": {"stage": "post-turn", "detached": {"settle": True, "maxQueueMs": 500, "coalesce": True}}}})
    manifest = next(r.manifest for r in package.runtimes if r.runtime_id == "p/job")
    options = manifest.schedule.detached
    assert options is not False
    job = detached_job(FUNCTION, options, manifest, {"mood": "calm", "ledger": 3}, "turn-1", {"traceparent": "00-x"})
    snapshot = from_struct(job.input)
    assert snapshot == {"inputs": {"mood": "calm"}, "sourceTurnId": "turn-1", "maxSettleWaitMs": options.max_settle_wait_ms,
                        SOURCE_TRACE: {"traceparent": "00-x"}}, "committed inputs are read anew when the job runs"
    assert (job.runtime_id, job.settle, job.max_queue_ms, job.max_execution_ms, job.coalesce) == ("p/f", True, 500, 0, True)

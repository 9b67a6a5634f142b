"""What a turn commits: vetoes, narrative, read dependencies, setup progress, speakers (turn/commit_rules.py)."""

from __future__ import annotations

from types import SimpleNamespace

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.execution.outcome import RuntimeOutcome
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.hooks.rules import replaced_payload
from services.scheduler.turn.commit_rules import (
    asks_hooks,
    commit_unit,
    keep_earlier_outcomes,
    landed,
    resolve_story_speakers,
    setup_commit,
    turn_narrative,
    unit_dependencies,
    veto,
    whole_turn_units,
)
from services.scheduler.turn.state import TurnState
from shared.structs import from_struct, to_struct


def proposal(proposal_id: str, kind: str = "plugin.data.set", unit: str = "", runtime: str = "p/r", payload: dict | None = None):
    return store_pb2.Proposal(id=proposal_id, type=kind, plugin_id="p", runtime_id=runtime, unit_runtime_id=unit,
                              payload=to_struct(payload or {}))


def test_a_proposal_belongs_to_its_unit_else_its_runtime_else_its_plugin() -> None:
    assert commit_unit(proposal("a", unit="p/top", runtime="p/nested")) == "p/top"
    assert commit_unit(proposal("a", runtime="p/r")) == "p/r"
    assert commit_unit(store_pb2.Proposal(id="a", plugin_id="p")) == "p"


def test_hooks_are_not_asked_about_a_unit_or_turn_that_will_not_commit() -> None:
    results = [store_pb2.RuntimeResult(runtime_id="p/story", story=True), store_pb2.RuntimeResult(runtime_id="p/setup", setup=True),
               store_pb2.RuntimeResult(runtime_id="p/audit")]
    whole_turn = whole_turn_units(results)
    assert whole_turn == {"p/story", "p/setup"}
    assert asks_hooks("p/audit", set(), whole_turn)
    assert not asks_hooks("p/audit", {"p/audit"}, whole_turn), "its unit was vetoed"
    assert asks_hooks("p/other", {"p/audit"}, whole_turn), "another system unit's veto takes only that unit"
    assert not asks_hooks("p/other", {"p/story"}, whole_turn), "a story unit's veto takes the whole turn"


def test_a_veto_names_the_plugin_that_aborted() -> None:
    trace = [common_pb2.HookTraceEntry(handler_plugin_id="quiet", status="ok"),
             common_pb2.HookTraceEntry(handler_plugin_id="guardian", status="abort")]
    outcome = veto(proposal("a"), trace, "no gold today")
    assert (outcome.proposal_id, outcome.status, outcome.code) == ("a", store_pb2.PROPOSAL_STATUS_REJECTED, "hook-aborted")
    assert outcome.reason == "PreStateCommit hook of guardian aborted it: no gold today"
    assert veto(proposal("a"), [], "no").reason == "PreStateCommit hook aborted it: no"


def test_only_a_replaced_payload_object_is_taken() -> None:
    assert replaced_payload({"proposal": {"payload": {"value": 2}, "type": "other"}}) == {"value": 2}
    assert replaced_payload({"proposal": {"payload": "text"}}) is None
    assert replaced_payload({"proposal": "garbage"}) is None
    assert replaced_payload({}) is None


def test_the_narrative_joins_the_stories_of_units_not_vetoed() -> None:
    kept = [proposal("a", "narrative.append", runtime="p/one", payload={"text": "First."}),
            proposal("b", "plugin.data.set", runtime="p/one", payload={"text": "not a story"}),
            proposal("c", "narrative.append", runtime="p/two", payload={"text": "Second."}),
            proposal("d", "narrative.append", runtime="p/three", payload={"text": "Vetoed."})]
    assert turn_narrative(kept, {"p/three"}) == "First.\n\nSecond."
    assert turn_narrative([], set()) == ""


def test_dependencies_list_sorted_needs_and_reads_of_units_that_ran() -> None:
    run = TurnState(TurnShared(history=[], packages={}))
    run.outcomes = {"p/a": RuntimeOutcome("success"), "p/b": RuntimeOutcome("success"), "p/c": RuntimeOutcome("skipped")}
    run.needs = {"p/b": {"p/z", "p/a"}, "p/gone": {"p/a"}}
    run.read_from = {"p/b": {"p/a"}, "p/c": set()}
    [only] = unit_dependencies(run)
    assert (only.unit_runtime_id, list(only.needs), list(only.read_from)) == ("p/b", ["p/a", "p/z"], ["p/a"])


def setup_run(*setup_ids: str) -> TurnState:
    run = TurnState(TurnShared(history=[], packages={"p": SimpleNamespace(version="2.0.0")}))
    run.shared.manifests = {rid: SimpleNamespace(schedule=SimpleNamespace(stage="setup")) for rid in setup_ids}
    return run


def test_setup_progress_of_setup_runtimes_and_playing_once_all_are_done() -> None:
    run = setup_run("p/intro", "p/world")
    run.outcomes = {"p/intro": RuntimeOutcome("success"), "p/world": RuntimeOutcome("failed", "no model")}
    results = [store_pb2.RuntimeResult(runtime_id="p/intro", plugin_id="p", status="success", setup=True),
               store_pb2.RuntimeResult(runtime_id="p/world", plugin_id="p", status="failed", reason="no model", setup=True),
               store_pb2.RuntimeResult(runtime_id="p/story", plugin_id="p", status="success", story=True)]
    session = store_pb2.Session(id="s", phase="setup")
    fields = setup_commit(results, run, session)
    assert set(fields["setup_progress"]) == {"p/intro", "p/world"}, "only setup runtimes record progress"
    assert from_struct(fields["setup_progress"]["p/intro"])["state"] == "done"
    assert from_struct(fields["setup_progress"]["p/world"])["state"] != "done"
    assert "phase" not in fields, "p/world is still to do"

    run.outcomes["p/world"] = RuntimeOutcome("success")
    results[1] = store_pb2.RuntimeResult(runtime_id="p/world", plugin_id="p", status="success", setup=True)
    assert setup_commit(results, run, session)["phase"] == "playing"


def test_a_setup_runtime_a_hook_turned_into_a_success_is_not_complete() -> None:
    run = setup_run("p/intro")
    run.outcomes = {"p/intro": RuntimeOutcome("success")}
    run.rewritten = {"p/intro"}
    results = [store_pb2.RuntimeResult(runtime_id="p/intro", plugin_id="p", status="success", setup=True)]
    fields = setup_commit(results, run, store_pb2.Session(id="s", phase="setup"))
    assert fields == {}, "it records no progress (it runs again next turn) and the session stays in setup"


def test_a_playing_session_without_setup_results_commits_no_setup_fields() -> None:
    run = setup_run("p/intro")
    assert setup_commit([store_pb2.RuntimeResult(runtime_id="p/story", story=True)], run, store_pb2.Session(phase="playing")) == {}


def test_earlier_outcomes_stay_and_landed_are_the_committed_ones() -> None:
    turn = store_pb2.Turn(proposal_outcomes=[store_pb2.ProposalOutcome(proposal_id="vetoed", status=store_pb2.PROPOSAL_STATUS_REJECTED)])
    committed = store_pb2.Turn(proposal_outcomes=[
        store_pb2.ProposalOutcome(proposal_id="a", status=store_pb2.PROPOSAL_STATUS_COMMITTED),
        store_pb2.ProposalOutcome(proposal_id="vetoed", status=store_pb2.PROPOSAL_STATUS_REJECTED, code="store")])
    keep_earlier_outcomes(committed, turn)
    assert [o.proposal_id for o in committed.proposal_outcomes] == ["a", "vetoed"], "one the store already reports is not repeated"
    committed = store_pb2.Turn(proposal_outcomes=[store_pb2.ProposalOutcome(proposal_id="a", status=store_pb2.PROPOSAL_STATUS_COMMITTED)])
    keep_earlier_outcomes(committed, turn)
    assert [o.proposal_id for o in committed.proposal_outcomes] == ["a", "vetoed"]
    assert landed(committed) == {"a"}


def test_story_speakers_resolve_in_the_proposal_and_its_result() -> None:
    story = proposal("a", "narrative.append", runtime="p/story", payload={
        "text": "…", "segments": [{"kind": "dialogue", "speaker": "Mira", "text": "Hi."}, {"kind": "dialogue", "speaker": "Nobody", "text": "?"}],
        "cues": {"present": ["Mira"]}})
    result = store_pb2.RuntimeResult(runtime_id="p/story", output=to_struct({"text": "…"}))
    other = store_pb2.RuntimeResult(runtime_id="p/other", output=to_struct({"kept": True}))
    resolve_story_speakers([story], [result, other], [{"id": "char-1", "name": "Mira"}])
    payload = from_struct(story.payload)
    assert payload["segments"][0]["speakerId"] == "char-1" and payload["presentCharacterIds"] == ["char-1"]
    assert from_struct(result.output)["unresolvedSpeakers"] == ["Nobody"]
    assert from_struct(result.output)["segments"] == payload["segments"]
    assert from_struct(other.output) == {"kept": True}

"""The turn's schedule: which runtimes run, in which stage batches, which event followers next (turn/schedule.py)."""

from __future__ import annotations

from types import SimpleNamespace

from covel.store.v1 import store_pb2
from services.scheduler.turn.dependency_graph import Dependency, StagePlan
from services.scheduler.turn.schedule import needed_upstream, next_event_layer, select_runtimes, stage_batches
from shared.structs import to_struct
from tests.scheduler.compiled import compiled_manifest


def runtime(runtime_id: str, stage: str = "") -> SimpleNamespace:
    return SimpleNamespace(runtime_id=runtime_id, plugin_id=runtime_id.split("/")[0], stage=stage)


def manifests(**written: dict) -> dict:
    """runtime id (p_name for p/name) -> its compiled manifest."""
    return {rid.replace("_", "/", 1): compiled_manifest(author, runtime_id=rid.replace("_", "/", 1)) for rid, author in written.items()}


def auto(stage: str, **schedule) -> dict:
    return {"schedule": {"stage": stage, **schedule}}


def test_triggers_choose_and_setup_runs_until_done_for_its_version() -> None:
    runtimes = [runtime("p/intro", "setup"), runtime("p/story", "narrative"), runtime("p/later", "post-turn"),
                runtime("p/button", "")]
    compiled = manifests(p_intro=auto("setup"), p_story=auto("narrative"), p_later=auto("post-turn", trigger={"startTurn": 3}),
                         p_button={"schedule": {"trigger": {"type": "manual"}}})
    playing = store_pb2.Session(phase="playing", setup_runtimes={"p/intro": to_struct({"state": "done", "version": "1.0.0"})})
    chosen = select_runtimes(runtimes, compiled, 1, None, playing, {"p": "1.0.0"})
    assert [r.runtime_id for r in chosen] == ["p/story"], "setup done for this version; startTurn 3; manual waits for RunManual"
    chosen = select_runtimes(runtimes, compiled, 1, None, playing, {"p": "2.0.0"})
    assert [r.runtime_id for r in chosen] == ["p/intro", "p/story"], "a new version runs its setup again, with the turn (late setup)"


def test_a_session_in_setup_schedules_its_setup_runtimes_and_the_rest() -> None:
    """The later stages are scheduled too: the runner runs them only once the setup stage finished the setup."""
    runtimes = [runtime("p/intro", "setup"), runtime("p/story", "narrative")]
    compiled = manifests(p_intro=auto("setup"), p_story=auto("narrative"))
    in_setup = store_pb2.Session(phase="setup")
    assert [r.runtime_id for r in select_runtimes(runtimes, compiled, 1, None, in_setup, {"p": "1"})] == ["p/intro", "p/story"]
    done = store_pb2.Session(phase="setup", setup_runtimes={"p/intro": to_struct({"state": "blocked", "version": "1"})})
    assert [r.runtime_id for r in select_runtimes(runtimes, compiled, 1, None, done, {"p": "1"})] == ["p/story"]


def test_stage_batches_in_stage_order_without_detached_or_empty_stages() -> None:
    selected = [runtime("p/audit", "audit"), runtime("p/story", "narrative"), runtime("p/job", "post-turn"),
                runtime("p/pre", "pre-turn"), runtime("p/post", "post-turn")]
    compiled = manifests(p_audit=auto("audit"), p_story=auto("narrative"), p_job=auto("post-turn", detached=True),
                         p_pre=auto("pre-turn"), p_post=auto("post-turn"))
    batches = stage_batches(selected, compiled)
    assert [[r.runtime_id for r in batch] for batch in batches.stages] == [["p/pre"], ["p/story"], ["p/post"], ["p/audit"]]
    assert [r.runtime_id for r in batches.detached] == ["p/job"]
    assert stage_batches([], {}).stages == []


def test_the_next_event_layer_is_unfinished_followers_of_fresh_topics() -> None:
    compiled = manifests(p_on_gold={"schedule": {"trigger": {"type": "event", "event": "gold"}}},
                         p_on_any={"schedule": {"trigger": {"type": "event", "events": ["gold", "fight"]}}},
                         p_done={"schedule": {"trigger": {"type": "event", "event": "gold"}}})
    followers = dict.fromkeys(compiled, object())
    fresh = [{"topic": "gold", "payload": 1, "source": "p/a"}, {"topic": "fight", "payload": 2, "source": "p/b"}]
    layer = next_event_layer(followers, compiled, fresh, finished={"p/done"})
    assert layer == {"p/on_gold": [fresh[0]], "p/on_any": fresh}
    assert next_event_layer(followers, compiled, [{"topic": "rain"}], finished=()) == {}


def test_needed_upstream_is_the_successful_gating_upstream() -> None:
    gate, order = Dependency("runtime", "p/a", "one", gate=True), Dependency("runtime", "p/c", "one", gate=False)
    plan = StagePlan(upstream={"p/d": [(gate, ["p/a", "p/b"]), (order, ["p/c"])]})
    assert needed_upstream(plan, "p/d", {"p/a": "success", "p/b": "failed", "p/c": "success"}) == {"p/a"}
    assert needed_upstream(plan, "p/other", {}) == set()

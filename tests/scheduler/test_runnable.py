"""What an execution runs with: its session, its runtimes, the one runtime it is asked for (turn/runnable.py)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import grpc
import pytest

from covel.registry.v1 import registry_pb2
from covel.store.v1 import store_pb2
from services.scheduler.turn.runnable import concealed_runtimes, execution_session, loaded_runtimes, named_runtime
from shared.errors import ServiceError
from shared.structs import from_struct
from tests.scheduler.compiled import compiled_manifest, compiled_package


def test_the_session_unchanged_when_all_run_and_no_default_is_missing() -> None:
    session = store_pb2.Session(id="s", active_plugins=["a", "b"])
    assert execution_session(session, ["a", "b"], [compiled_package("a"), compiled_package("b")]) is session


def test_hooks_see_only_the_plugins_that_run_now_with_setting_defaults() -> None:
    session = store_pb2.Session(id="s", active_plugins=["a", "b"])
    toned = compiled_package("a", package={"contributes": {"settings": [{"key": "tone", "type": "text", "default": "dry"}]}})
    seen = execution_session(session, ["a"], [toned])
    assert list(seen.active_plugins) == ["a"] and from_struct(seen.plugin_settings["a"]) == {"tone": "dry"}
    assert list(session.active_plugins) == ["a", "b"] and "a" not in session.plugin_settings, "the session itself is not changed"


def test_only_loaded_packages_give_runtimes_and_concealed_ones_are_named() -> None:
    failed = dataclasses.replace(compiled_package("b", {"b/one": {}}), state=registry_pb2.PLUGIN_STATE_FAILED)
    assert [r.runtime_id for r in loaded_runtimes([compiled_package("a", {"a/one": {}, "a/two": {}}), failed])] == ["a/one", "a/two"]
    manifests = {"a/one": compiled_manifest({"io": {"concealed": True}}, runtime_id="a/one"), "a/two": compiled_manifest(runtime_id="a/two")}
    assert concealed_runtimes(manifests) == {"a/one"}


RUNTIMES = [SimpleNamespace(runtime_id="p/button", plugin_id="p"), SimpleNamespace(runtime_id="p/auto", plugin_id="p")]
MANIFESTS = {"p/button": compiled_manifest({"schedule": {"trigger": {"type": "manual"}}}, runtime_id="p/button"),
             "p/auto": compiled_manifest({"schedule": {"stage": "post-turn"}}, runtime_id="p/auto")}


def named(runtime_id: str, *, detached: bool = False, sitting=(), unavailable=None):
    return named_runtime(runtime_id, detached=detached, runtimes=RUNTIMES, manifests=MANIFESTS, sitting=sitting,
                         unavailable=unavailable or {})


def refused(runtime_id: str, **kwargs) -> ServiceError:
    with pytest.raises(ServiceError) as raised:
        named(runtime_id, **kwargs)
    return raised.value


def test_a_turn_that_schedules_its_own_names_none_and_run_manual_gets_its_manual_runtime() -> None:
    assert named("") is None
    assert named("p/button").runtime_id == "p/button"
    assert named("p/auto", detached=True).runtime_id == "p/auto", "a detached job's runtime needs no manual trigger"


def test_run_manual_refuses_a_runtime_it_cannot_run_saying_why() -> None:
    missing = refused("p/none")
    assert missing.code == grpc.StatusCode.NOT_FOUND and "not in this session's plugins" in missing.message
    auto = refused("p/auto")
    assert auto.code == grpc.StatusCode.FAILED_PRECONDITION and "triggered by auto" in auto.message
    gone = refused("p/none", detached=True)
    assert gone.code == grpc.StatusCode.FAILED_PRECONDITION and "no longer in the session's runnable plugins" in gone.message


def test_a_runtime_of_a_plugin_sitting_out_is_refused_with_the_registry_reason() -> None:
    sitting = [compiled_package("q", {"q/button": {"schedule": {"trigger": {"type": "manual"}}}})]
    unavailable = {"q": registry_pb2.RejectedPlugin(plugin_id="q", code="approval-required", reason="approve q first")}
    gated = refused("q/button", sitting=sitting, unavailable=unavailable)
    assert gated.code == grpc.StatusCode.FAILED_PRECONDITION
    assert gated.message == "runtime q/button does not run now: approval-required: approve q first"

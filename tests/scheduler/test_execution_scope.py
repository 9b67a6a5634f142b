"""The execution identity the scheduler puts in every hook context (hooks.proto HookContext 10-13)."""

from __future__ import annotations

from covel.store.v1 import store_pb2
from services.scheduler.hooks.bus import ExecutionScope


def test_a_scheduled_run_is_its_own_root_and_nested_and_subagent_runs_keep_it() -> None:
    turn = ExecutionScope(store_pb2.Session(id="s", locale="en"), "t", 1)
    assert turn.context().execution_id == "" and turn.context().root_execution_id == "", "turn events: no execution"
    root = turn.execution("run-1")
    nested = root.execution("nested-1")
    helper = nested.execution("call-1", subagent_call_id="call-1", parent_runtime_id="p/nester")
    ids = [(s.context("p", "p/r").execution_id, s.context().root_execution_id, s.context().subagent_call_id,
            s.context().parent_runtime_id) for s in (root, nested, helper)]
    assert ids == [("run-1", "run-1", "", ""), ("nested-1", "run-1", "", ""), ("call-1", "run-1", "call-1", "p/nester")]
    # A nested run inside a subagent's scope is no subagent run itself.
    assert helper.execution("nested-2").context().subagent_call_id == ""
    assert turn.execution_id == "" and root.turn_id == "t", "the turn's scope is left as it was"

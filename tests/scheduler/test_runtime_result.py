"""PostRuntime's result rules."""

from services.scheduler.turn.runtime_result import apply_replaced_result

ORIGINAL = {
    "pluginId": "p", "runtimeId": "p/r", "runId": "run", "turnId": "t", "status": "success",
    "output": {"a": 1}, "canonicalValue": 1, "pendingProposals": [{"id": "x"}], "effects": {"events": []}, "completion": "done",
}


def test_identity_is_kept_and_writes_only_come_from_the_runtime() -> None:
    result = apply_replaced_result(ORIGINAL, {"runtimeId": "evil", "pendingProposals": [{"id": "added"}], "reason": "noted"})
    assert result["runtimeId"] == "p/r" and result["pendingProposals"] == [{"id": "x"}] and result["reason"] == "noted"


def test_status_change_discards_every_write() -> None:
    result = apply_replaced_result({**ORIGINAL, "status": "failed"}, {"status": "success"})
    assert result["status"] == "success" and result["pendingProposals"] == [] and result["completion"] is None
    assert result["writesDiscarded"] is True


def test_output_change_without_canonical_value_drops_it() -> None:
    assert "canonicalValue" not in apply_replaced_result(ORIGINAL, {"output": {"a": 2}})
    kept = apply_replaced_result(ORIGINAL, {"output": {"a": 2}, "canonicalValue": 2})
    assert kept["canonicalValue"] == 2


def test_not_a_dict_changes_nothing() -> None:
    assert apply_replaced_result(ORIGINAL, "garbage") is ORIGINAL

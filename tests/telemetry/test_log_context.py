"""Which session and turn a request is about, as the services bind them to their log lines."""

from __future__ import annotations

from covel.gateway.v1 import gateway_pb2
from covel.hooks.v1 import hooks_pb2
from covel.store.v1 import store_pb2
from shared.structs import to_struct
from shared.telemetry.log_context import ids_of


def test_ids_come_from_the_request_its_context_its_origin_or_its_turn():
    assert ids_of(store_pb2.GetTurnRequest(session_id="s1", turn_id="t1")) == {"session_id": "s1", "turn_id": "t1"}
    assert ids_of(hooks_pb2.DispatchRequest(event="TurnStart", context=hooks_pb2.HookContext(session_id="s2", turn_id="t2"))) == \
        {"session_id": "s2", "turn_id": "t2"}
    assert ids_of(gateway_pb2.GenerateRequest(origin=gateway_pb2.CallOrigin(session_id="s3", turn_id="t3"))) == \
        {"session_id": "s3", "turn_id": "t3"}
    assert ids_of(store_pb2.CommitTurnRequest(session_id="s4", turn=store_pb2.Turn(id="t4", session_id="s4"))) == \
        {"session_id": "s4", "turn_id": "t4"}
    # EmitEvent's `context` is a Struct of the producer's fields; its `session` is the HookContext.
    emit = hooks_pb2.EmitEventRequest(session=hooks_pb2.HookContext(session_id="s5"), context=to_struct({"session_id": "no"}))
    assert ids_of(emit) == {"session_id": "s5"}


def test_a_request_about_no_session_binds_nothing():
    assert ids_of(store_pb2.CreateSessionRequest()) == {}
    assert ids_of(hooks_pb2.DispatchRequest(event="TurnStart")) == {}
    assert ids_of(b"not a message") == {}

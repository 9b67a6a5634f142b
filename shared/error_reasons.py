"""The stable reasons the services' errors carry in google.rpc.ErrorInfo (domain `covel.dev`).

Every non-OK status a service answers carries an ErrorInfo: a reason of this table where one applies, else
the status code's name (`INVALID_ARGUMENT`, `UNAUTHENTICATED`, `PERMISSION_DENIED`, `INTERNAL`, ...), and a
peer's failure passed on keeps the peer's reason, or becomes `PEER_<CODE>` when the peer was unreachable.
A program branches on the reason, never on the message. docs/api.md's table is made from this one
(covel_cli/api_doc_tables.py) and tests/errors/test_error_reasons.py checks that every reason the code
raises is here.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

ERROR_DOMAIN = "covel.dev"
# A peer that could not be reached, passed on (shared/errors.py _relay): PEER_UNAVAILABLE, PEER_DEADLINE_EXCEEDED, ...
PEER_PREFIX = "PEER_"


@dataclass(frozen=True)
class Reason:
    code: grpc.StatusCode
    # The other google.rpc details that come with it.
    details: str
    meaning: str


def _not_found(record: str, what: str) -> Reason:
    return Reason(grpc.StatusCode.NOT_FOUND, f"ResourceInfo (`{record}`, the id)", what)


REASONS: dict[str, Reason] = {
    "SESSION_NOT_FOUND": _not_found("covel.scheduler.v1.Session", "no session has that id, or the caller may not see it (both answer alike)"),
    "TURN_NOT_FOUND": _not_found("covel.scheduler.v1.Turn", "no turn of the session has that id"),
    "INTERACTION_NOT_FOUND": _not_found("covel.scheduler.v1.Interaction", "no open interaction of the session has that id"),
    "DETACHED_JOB_NOT_FOUND": _not_found("covel.store.v1.DetachedJob", "no detached job has that id"),
    "PLUGIN_NOT_FOUND": _not_found("covel.registry.v1.PluginPackage", "no installed plugin has that id"),
    "PLUGIN_NOT_ACTIVE": _not_found("covel.registry.v1.PluginPackage",
                                    "InvokeAction named a plugin that does not run in the session now; the message says why "
                                    "(not in the session, not approved, failed to load, a missing provider, ...)"),
    "RUNTIME_NOT_FOUND": _not_found("covel.scheduler.v1.Runtime", "RunManual named a runtime none of the session's plugins has"),
    "RUNTIME_NOT_MANUAL": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `runtimes/<id>`)",
                                 "RunManual named a runtime not triggered manually (schedule.trigger.type: manual)"),
    "PAYLOAD_INVALID": Reason(grpc.StatusCode.INVALID_ARGUMENT, "BadRequest (field `payload`); metadata `runtime_id`",
                              "RunManual's payload does not match the runtime's io.payloadSchema: the message names each mismatch"),
    "SESSION_ENDED": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `sessions/<id>`)",
                            "the session has ended; no more turns run in it"),
    "NO_RUNNING_TURN": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `sessions/<id>`)",
                              "Cancel or Interject found no turn to reach (an interjection joins a player's turn only): "
                              "send the words as the next action instead"),
    "MESSAGE_REFUSED": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `sessions/<id>`)",
                              "a plugin's admission check refused the player's message"),
    "SESSION_BUSY": Reason(grpc.StatusCode.ABORTED, "RetryInfo", "another turn of the session still runs past the wait: retry after the delay"),
    "DETACHED_QUEUE_FULL": Reason(grpc.StatusCode.RESOURCE_EXHAUSTED, "RetryInfo",
                                  "the session's detached work is at its bound: retry after the delay"),
    "TURN_FAILED_RETRYABLE": Reason(grpc.StatusCode.UNAVAILABLE, "RetryInfo; metadata `turn_id`",
                                    "the turn failed for a passing reason: send it again with the same idempotency_key"),
}


def default_reason(code: grpc.StatusCode) -> str:
    """The reason of an error no entry of REASONS describes: its status code's name."""
    return code.name

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
# A peer that could not be reached, passed on (shared/errors.py relayed): PEER_UNAVAILABLE, PEER_DEADLINE_EXCEEDED, ...
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
    "PLUGIN_DATA_NOT_FOUND": _not_found("covel.store.v1.PluginDataEntry",
                                        "AdminDeletePluginData found no record at sessions/<id>/plugins/<plugin>/data/<namespace>/<key>"),
    "PLUGIN_NOT_FOUND": _not_found("covel.registry.v1.PluginPackage", "no installed plugin has that id"),
    "PLUGIN_NOT_ACTIVE": _not_found("covel.registry.v1.PluginPackage",
                                    "InvokeAction named a plugin that does not run in the session now; the message says why "
                                    "(not in the session, not approved, failed to load, a missing provider, ...)"),
    "MEDIA_NOT_DECLARED": _not_found("covel.scheduler.v1.MediaFile", "GetMedia named a file the world's media[] or a webview "
                                     "panel's folder does not declare (or the session has no world)"),
    "MEDIA_FILE_MISSING": _not_found("covel.scheduler.v1.MediaFile", "the package declares the file but does not hold it"),
    "RUNTIME_NOT_FOUND": _not_found("covel.scheduler.v1.Runtime", "RunManual named a runtime none of the session's plugins has"),
    "SETTLEMENT_NOT_FOUND": _not_found("covel.scheduler.v1.DimensionSettlement", "no settlement receipt of that turn and runtime"),
    "TOOL_NOT_FOUND": _not_found("covel.hooks.v1.Tool", "the plugin registers no tool of that name"),
    "MODEL_STREAM_NOT_FOUND": _not_found("covel.hooks.v1.ModelAnswerStream", "no run_model_stream answer has that stream id"),
    "TURN_RUNNING": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `sessions/<id>`)",
                       "the session has a turn running: cancel it or let it finish first"),
    "OPENING_PLAYED": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `sessions/<id>`)",
                       "SelectOpening after the session's first completed player turn: the story has read its opening"),
    "NO_OPENING": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `sessions/<id>`)",
                       "SelectOpening on a session without a world's opening to change"),
    "MODEL_NOT_CONFIGURED": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `slots/<name>`)",
                       "the model slot or override the call names is not configured: the message says where to set it"),
    "RUNTIME_NOT_RUNNABLE": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `runtimes/<id>`)",
                       "the runtime does not run now (its plugin is waiting, paused or gone): the message says why"),
    "IDEMPOTENCY_KEY_REUSED": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `turns/<id>`)",
                       "the idempotency_key belongs to another request: retry with the same request, or use a new key"),
    "INTERACTION_ANSWERED": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `interactions/<id>`)",
                       "the interaction was answered already"),
    "INTERACTION_NOT_RESUMABLE": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `interactions/<id>`)",
                       "the run that asked the interaction left nothing to resume"),
    "WORLD_FAILED": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `worlds/<id>`)",
                       "the world package failed to load: GetWorld and covel validate-world say why"),
    "INSTALL_REFUSED": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `plugins/<id>`)",
                       "InstallPackage refused the package: the message says why"),
    "SETTLEMENT_OPEN": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `settlements/<turn>/<runtime>`)",
                       "the world's dimensions are not settled: ResolveSettlement the receipt first"),
    "SETTLEMENT_CLOSED": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `settlements/<turn>/<runtime>`)",
                       "the settlement receipt is closed already"),
    "HOOK_STATE_NOT_A_NUMBER": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `state/<plugin>/<key>`)",
                       "ctx.state.add on a key that holds no number"),
    "HOOK_STATE_FULL": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `state/<plugin>`)",
                       "the plugin holds as many keys of state in the session as it may: delete some first"),
    "JOB_NOT_REQUEUEABLE": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `detachedJobs/<id>`)",
                       "only a detached job that ended without success can be queued again"),
    "ACTION_NOT_FOUND": _not_found("covel.scheduler.v1.Action", "the plugin declares no action of that name"),
    "ACTION_ANSWERED_NOT_FOUND": _not_found("covel.scheduler.v1.Action", "the plugin's action answered not-found: its message says what"),
    "COMMAND_NOT_FOUND": _not_found("covel.scheduler.v1.Command", "no plugin of the session has that command (ListCommands lists them)"),
    "ACTION_UNAVAILABLE": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `actions/<plugin>/<action>`)",
                       "the plugin's action said it cannot run now: its message says why"),
    "NO_WORLD": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `sessions/<id>`)",
                       "SyncWorldData on a session not started in a world: it has no world data"),
    "WORLD_MISMATCH": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `sessions/<id>`)",
                       "the store's SyncWorldData named another world than the session's"),
    "WORLD_SYNC_REFUSED": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `sessions/<id>`)",
                       "a world data sync would remove a record its dataset does not let be deleted (no `delete` in its ops): nothing "
                       "was changed"),
    "NO_WORLD_FOLDER": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `settings/COVEL_WORLD_DIRS`)",
                       "the registry has no world folder to import into: set COVEL_WORLD_DIRS"),
    "WORLD_SHADOWED": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `worlds/<id>`)",
                       "the imported world was written, but another folder's world of that id is served"),
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
    "SEAT_GRANT_INVALID": Reason(grpc.StatusCode.PERMISSION_DENIED, "",
                                 "JoinSeat: the invitation was used, revoked or replaced by a newer one: ask the owner for a new one"),
    "SEAT_GRANT_EXPIRED": Reason(grpc.StatusCode.PERMISSION_DENIED, "", "JoinSeat: the invitation's time ran out: ask the owner for a new one"),
    "SEAT_GRANT_OWN_SESSION": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `sessions/<id>`)",
                                     "JoinSeat by the session's owner: its main seat is already theirs; hand the invitation to another player"),
    "SEAT_GUEST_NOT_ALLOWED": Reason(grpc.StatusCode.PERMISSION_DENIED, "",
                                     "a guest of a session's seat called what only its owner may (a guest reads, watches and plays its seat)"),
    "SEAT_NOT_YOURS": Reason(grpc.StatusCode.PERMISSION_DENIED, "BadRequest (`actions[i].seat_id`)",
                             "a guest's action named another seat than its own: leave seat_id empty or name its own"),
    "SESSION_BUSY": Reason(grpc.StatusCode.ABORTED, "RetryInfo", "another turn of the session still runs past the wait: retry after the delay"),
    "STREAM_CALLS_FULL": Reason(grpc.StatusCode.RESOURCE_EXHAUSTED, "",
                                "TurnHooks, TurnModelCalls: a turn's call stream has its most calls running at once (256): wait for "
                                "their answers"),
    "READ_CONFLICT": Reason(grpc.StatusCode.ABORTED, "",
                            "CommitTurn of a turn that ran without the session's lease (a detached job): what it read changed since; "
                            "nothing was written: run it again on the new state"),
    "DETACHED_QUEUE_FULL": Reason(grpc.StatusCode.RESOURCE_EXHAUSTED, "RetryInfo",
                                  "the session's detached work is at its bound: retry after the delay"),
    "TURN_OFF_LINE": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `turns/<id>`)",
                            "the turn is off the story's line (rewound past, or a version not chosen): rewind to or choose a turn "
                            "on the line (ListTurns marks them)"),
    "TURN_NOT_LAST": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `turns/<id>`)",
                            "retry, edit and choosing a version act on the last player's turn of the line only: rewind first "
                            "to re-run an earlier one"),
    "TURN_NO_CHECKPOINT": Reason(grpc.StatusCode.FAILED_PRECONDITION, "PreconditionFailure (subject `turns/<id>`)",
                                 "the turn did not commit, or was recorded before the store kept checkpoints, so the state "
                                 "it left cannot be restored: pick a later committed turn"),
    "IMPORT_REFUSED": Reason(grpc.StatusCode.INVALID_ARGUMENT, "BadRequest (the field of the card or lorebook, and what to do)",
                             "an imported card or lorebook broke a bound or a rule of its format (docs/worlds.md, \"Import\")"),
    "WORLD_EXISTS": Reason(grpc.StatusCode.ALREADY_EXISTS, "none",
                           "ImportWorld named a world id a served world has: pick another world_id, or set replace"),
    "TURN_FAILED_RETRYABLE": Reason(grpc.StatusCode.UNAVAILABLE, "RetryInfo; metadata `turn_id`",
                                    "the turn failed for a passing reason: send it again with the same idempotency_key"),
}


def default_reason(code: grpc.StatusCode) -> str:
    """The reason of an error no entry of REASONS describes: its status code's name."""
    return code.name

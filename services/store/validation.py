"""Checks of incoming requests: INVALID_ARGUMENT naming the field, before any database work."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from google.protobuf import struct_pb2

from covel.store.v1 import store_pb2
from shared.errors import invalid_argument, require
from shared.plugin_data.operations import OPERATION_KINDS
from shared.seats import check_seats
from shared.structs import from_struct

LOCALE = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
PHASES = ("setup", "playing")
ORIGINS = ("player", "continuation", "manual", "background", "settlement", "action", "resume")
IDEMPOTENCY_KEY_MAX = 128
PLUGIN_ID_MAX = 200
# AcquireTurnLease's reads.plugin_data: the scopes one lease reads at most.
PLUGIN_DATA_SCOPES_MAX = 64
TITLE_MAX = 500
# shared/security/principals.py: PRINCIPAL_NAME allows up to 200 characters.
OWNER_MAX = 200
# Leases: ttl and wait are bounded so a typo cannot lock a session for a day.
LEASE_TTL_MAX_MS = 60 * 60 * 1000
LEASE_WAIT_MAX_MS = 5 * 60 * 1000
CLAIM_WAIT_MAX_MS = 30_000
# ResolveSettlement: how a person closes an open receipt (services/store/settlements.py).
SETTLEMENT_RESOLUTIONS = ("handled", "skipped")
# An interaction's kind ("form", "choice", "confirm"; the scheduler checks which): the column's width.
INTERACTION_KIND_MAX = 32
FINISHED_STATUSES = (store_pb2.TURN_STATUS_COMMITTED, store_pb2.TURN_STATUS_ABORTED, store_pb2.TURN_STATUS_FAILED)


def session_id(value: str, field: str = "session_id") -> str:
    return require(value, field, "the id CreateSession returned")


def session_title(value: str, field: str = "title") -> str:
    """A new title: trimmed, 1 to TITLE_MAX characters, no control characters."""
    title = value.strip()
    if not title:
        raise invalid_argument(field, "is empty; give the session a title")
    if len(title) > TITLE_MAX:
        raise invalid_argument(field, f"is {len(title)} characters; at most {TITLE_MAX}")
    if any(ord(char) < 32 or ord(char) == 127 for char in title):
        raise invalid_argument(field, "holds a control character (a line break, a tab); a title is one line")
    return title


def plugin_list(values: list[str], field: str) -> list[str]:
    seen: set[str] = set()
    for index, value in enumerate(values):
        if not value.strip():
            raise invalid_argument(f"{field}[{index}]", "is empty; use a plugin id")
        if len(value) > PLUGIN_ID_MAX:
            raise invalid_argument(f"{field}[{index}]", f"is longer than {PLUGIN_ID_MAX} characters")
        if value in seen:
            raise invalid_argument(f"{field}[{index}]", f"{value!r} is listed twice")
        seen.add(value)
    return list(values)


def new_session(request: store_pb2.CreateSessionRequest) -> store_pb2.Session:
    """The caller's session fields, checked; defaults filled in (locale "en", phase "playing")."""
    session = store_pb2.Session()
    session.CopyFrom(request.session)
    _store_assigned_unset(session)
    session.locale = session.locale or "en"
    if not LOCALE.match(session.locale):
        raise invalid_argument("session.locale", f"is {session.locale!r}; use a language tag such as en or zh-CN")
    session.phase = session.phase or "playing"
    if session.phase not in PHASES:
        raise invalid_argument("session.phase", f"is {session.phase!r}; use one of {', '.join(PHASES)}")
    if len(session.title) > TITLE_MAX:
        raise invalid_argument("session.title", f"is longer than {TITLE_MAX} characters")
    if len(session.world_id) > PLUGIN_ID_MAX:
        raise invalid_argument("session.world_id", f"is longer than {PLUGIN_ID_MAX} characters")
    if len(session.owner) > OWNER_MAX:
        raise invalid_argument("session.owner", f"is longer than {OWNER_MAX} characters; name the principal that creates the session")
    for field in ("active_plugins", "requested_plugins", "excluded_plugins", "approved_plugins"):
        plugin_list(list(getattr(session, field)), f"session.{field}")
    # The characters a seat names: the world's, when the request brings one (checked with it).
    characters = {character.id for character in request.world.characters} if request.HasField("world") else set()
    check_seats(list(session.seats), characters, "session.seats")
    for runtime_id, model in session.runtime_model_overrides.items():
        if not runtime_id.strip() or not model.strip():
            raise invalid_argument("session.runtime_model_overrides", "runtime ids and models must be non-empty")
    for plugin_id in session.plugin_settings:
        if not plugin_id.strip():
            raise invalid_argument("session.plugin_settings", "keys are plugin ids and must be non-empty")
    setup_progress(session.setup_runtimes, "session.setup_runtimes")
    return session


def _store_assigned_unset(session: store_pb2.Session) -> None:
    """What the store assigns (id, status, counters, times) is left unset by the caller."""
    if session.id:
        raise invalid_argument("session.id", "is assigned by the store; leave it empty")
    if session.status not in (store_pb2.SESSION_STATUS_UNSPECIFIED, store_pb2.SESSION_STATUS_ACTIVE):
        raise invalid_argument("session.status", "a new session is ACTIVE; leave it unset")
    if session.completed_player_turns:
        raise invalid_argument("session.completed_player_turns", "a new session has 0 completed turns; leave it unset")
    if session.player_messages:
        raise invalid_argument("session.player_messages", "a new session has no player messages yet; leave it unset")
    if session.HasField("created_at") or session.HasField("updated_at"):
        raise invalid_argument("session.created_at", "times are assigned by the store; leave them unset")


def idempotency_key(value: str, field: str) -> str:
    if len(value) > IDEMPOTENCY_KEY_MAX:
        raise invalid_argument(field, f"is longer than {IDEMPOTENCY_KEY_MAX} characters")
    return value


def ttl_ms(value: int, default_ms: int, field: str = "ttl_ms") -> int:
    if value < 0 or value > LEASE_TTL_MAX_MS:
        raise invalid_argument(field, f"is {value}; use 0 (default {default_ms}) up to {LEASE_TTL_MAX_MS}")
    return value or default_ms


def acquire(request: store_pb2.AcquireTurnLeaseRequest) -> None:
    session_id(request.session_id)
    idempotency_key(request.idempotency_key, "idempotency_key")
    if request.wait_ms < 0 or request.wait_ms > LEASE_WAIT_MAX_MS:
        raise invalid_argument("wait_ms", f"is {request.wait_ms}; use 0 (answer at once) up to {LEASE_WAIT_MAX_MS}")
    if len(request.holder) > PLUGIN_ID_MAX:
        raise invalid_argument("holder", f"is longer than {PLUGIN_ID_MAX} characters")
    if request.reads.history.player_turns < 0:
        raise invalid_argument("reads.history.player_turns", f"is {request.reads.history.player_turns}; use 0 (all since the latest "
                               "summary) or a positive number of player turns")
    if len(request.reads.plugin_data) > PLUGIN_DATA_SCOPES_MAX:
        raise invalid_argument("reads.plugin_data", f"asks for {len(request.reads.plugin_data)} scopes; at most {PLUGIN_DATA_SCOPES_MAX}")
    for index, scope in enumerate(request.reads.plugin_data):
        if not scope.plugin_id or len(scope.plugin_id) > PLUGIN_ID_MAX or len(scope.namespace) > PLUGIN_ID_MAX:
            raise invalid_argument(f"reads.plugin_data[{index}]", "name a plugin id (and a namespace, or none for all of its data)")
    if (request.without_lease or request.turn_id) and request.origin != "background":
        field = "without_lease" if request.without_lease else "turn_id"
        raise invalid_argument(field, f"is for a detached job's turn (origin \"background\"), not origin {request.origin or 'player'!r}")
    if request.turn_id:
        _bounded_id(request.turn_id, "turn_id", "the id of the turn the job ran as")


def commit(request: store_pb2.CommitTurnRequest) -> None:
    session_id(request.session_id)
    _job_commit(request)
    if not request.HasField("turn"):
        raise invalid_argument("turn", "is required: the turn as run")
    turn = request.turn
    require(turn.id, "turn.id", "the turn_id of the lease")
    if turn.session_id and turn.session_id != request.session_id:
        raise invalid_argument("turn.session_id", f"is {turn.session_id} but the request is for session {request.session_id}")
    if turn.status not in FINISHED_STATUSES:
        raise invalid_argument("turn.status", "use COMMITTED, ABORTED or FAILED")
    idempotency_key(turn.idempotency_key, "turn.idempotency_key")
    if turn.origin and turn.origin not in ORIGINS:
        raise invalid_argument("turn.origin", f"is {turn.origin!r}; use one of {', '.join(ORIGINS)}")
    seen: set[str] = set()
    for index, proposal in enumerate(request.proposals):
        require(proposal.id, f"proposals[{index}].id", "a unique id per proposal")
        if proposal.id in seen:
            raise invalid_argument(f"proposals[{index}].id", f"{proposal.id!r} is used by another proposal")
        seen.add(proposal.id)
        require(proposal.type, f"proposals[{index}].type", "e.g. narrative.append or plugin.data")
        require(proposal.plugin_id, f"proposals[{index}].plugin_id", "the plugin that proposed the write")
    commit_extras(request)


def session_plugins(request: store_pb2.UpdateSessionPluginsRequest) -> None:
    session_id(request.session_id)
    for field in ("active_plugins", "requested_plugins", "excluded_plugins"):
        plugin_list(list(getattr(request, field)), field)


def approvals(request: store_pb2.UpdateSessionApprovalsRequest) -> None:
    session_id(request.session_id)
    plugin_list(list(request.approve), "approve")
    plugin_list(list(request.revoke), "revoke")
    approving = set(request.approve)
    for index, plugin_id in enumerate(request.revoke):
        if plugin_id in approving:
            raise invalid_argument(f"revoke[{index}]", f"{plugin_id!r} is also in approve; name it in one list")


# "queued": released unfinished (its worker is shutting down), back in the queue for another;
# "retry": a passing failure, queued again after a backoff or parked (detached_jobs.retry_or_park).
JOB_STATUSES = ("succeeded", "failed", "queued", "retry")
# Every status a job may be in (ListDetachedJobsRequest.statuses).
JOB_STATES = ("queued", "running", "succeeded", "failed", "timed-out", "orphaned", "superseded", "cancelled", "parked", "dropped")
JOB_TIMEOUT_MAX_MS = 24 * 60 * 60 * 1000


SETUP_STATES = {"pending": (), "done": ("resolution",), "blocked": ("reason",)}
# version / attempts: the scheduler's bookkeeping (completion per plugin version, retry budget).
SETUP_FIELDS = {"state", "lastError", "resolution", "warning", "reason", "version", "attempts"}


def setup_progress(progress: Mapping[str, struct_pb2.Struct], field: str) -> None:
    """{state: pending, lastError?} | {state: done, resolution: completed|waived, warning?} | {state: blocked, reason, lastError?}."""
    for runtime_id, struct in progress.items():
        where = f"{field}[{runtime_id}]"
        if not runtime_id.strip():
            raise invalid_argument(field, "keys are setup runtime ids and must be non-empty")
        value = from_struct(struct)
        state = value.get("state")
        if state not in SETUP_STATES:
            raise invalid_argument(f"{where}.state", f"is {state!r}; use pending, done or blocked")
        for name in SETUP_STATES[state]:
            if not isinstance(value.get(name), str) or not value[name]:
                raise invalid_argument(f"{where}.{name}", f"is required when state is {state}")
        if state == "done" and value["resolution"] not in ("completed", "waived"):
            raise invalid_argument(f"{where}.resolution", "use completed or waived")
        unknown = set(value) - SETUP_FIELDS
        if unknown:
            raise invalid_argument(f"{where}", f"unknown fields {', '.join(sorted(unknown))}")


def _job_commit(request: store_pb2.CommitTurnRequest) -> None:
    """The lease to commit with: the one AcquireTurnLease returned, or (a detached job's) taken by the commit."""
    job = request.job
    if not job.take_lease:
        require(request.lease_id, "lease_id", "the lease AcquireTurnLease returned (or job.take_lease, for a detached job)")
    elif request.lease_id:
        raise invalid_argument("lease_id", "must be empty with job.take_lease: the commit takes the lease itself")
    else:
        require(job.holder, "job.holder", "who takes the lease (as AcquireTurnLeaseRequest.holder)")
    if job.wait_ms < 0 or job.wait_ms > LEASE_WAIT_MAX_MS:
        raise invalid_argument("job.wait_ms", f"is {job.wait_ms}; use 0 (answer at once) up to {LEASE_WAIT_MAX_MS}")
    if job.job_id or job.job_lease_id:
        require(job.job_id, "job.job_id", "the detached job the turn ran")
        require(job.job_lease_id, "job.job_lease_id", "the job's claim (ClaimDetachedJob's lease_id)")


def commit_extras(request: store_pb2.CommitTurnRequest) -> None:
    """Datasets, dependencies, dimension owners, detached jobs and setup progress of a commit."""
    setup_progress(request.setup_progress, "setup_progress")
    if request.phase and request.phase != "playing":
        raise invalid_argument("phase", f"is {request.phase!r}; a turn can only end the setup phase (playing) or leave it empty")
    _dataset_policies(request.datasets)
    _unit_dependencies(request.dependencies)
    for index, plugin_id in enumerate(request.dimension_owners):
        require(plugin_id, f"dimension_owners[{index}]", "a plugin id")
    _detached_jobs(request.detached_jobs)
    _settlement_duties(request.settlements, request.turn.id)
    _interactions(request.turn)
    _read_checks(request.read_checks)


def _read_checks(checks: store_pb2.ReadChecks) -> None:
    if len(checks.plugin_data) > PLUGIN_DATA_SCOPES_MAX:
        raise invalid_argument("read_checks.plugin_data", f"names {len(checks.plugin_data)} scopes; at most {PLUGIN_DATA_SCOPES_MAX}")
    for index, read in enumerate(checks.plugin_data):
        if not read.scope.plugin_id or len(read.scope.plugin_id) > PLUGIN_ID_MAX or len(read.scope.namespace) > PLUGIN_ID_MAX:
            raise invalid_argument(f"read_checks.plugin_data[{index}].scope", "name a plugin id (and a namespace, or none for all of its data)")
        require(read.revision, f"read_checks.plugin_data[{index}].revision", "the revision the read answered (PluginDataRead.revision)")


def _interactions(turn: store_pb2.Turn) -> None:
    """Ids the interactions table can keep: those asked (a duplicate is the commit's to drop, with a trace
    entry) and those answered, each answered once."""
    answered: set[str] = set()
    for index, action in enumerate(turn.actions):
        if not action.HasField("interaction"):
            continue
        where = f"turn.actions[{index}].interaction.id"
        _bounded_id(action.interaction.id, where, "the interaction the action answers")
        if action.interaction.id in answered:
            raise invalid_argument(where, f"{action.interaction.id!r} is answered by another action of the turn")
        answered.add(action.interaction.id)
    for index, result in enumerate(turn.runtime_results):
        for position, interaction in enumerate(result.interactions):
            where = f"turn.runtime_results[{index}].interactions[{position}]"
            _bounded_id(interaction.id, f"{where}.id", "the id the scheduler assigned")
            if len(interaction.kind) > INTERACTION_KIND_MAX:
                raise invalid_argument(f"{where}.kind", f"is longer than {INTERACTION_KIND_MAX} characters; use form, choice or confirm")
            for field in ("plugin_id", "runtime_id"):
                if len(getattr(interaction, field) or getattr(result, field)) > PLUGIN_ID_MAX:
                    raise invalid_argument(f"{where}.{field}", f"is longer than {PLUGIN_ID_MAX} characters")


def _bounded_id(value: str, field: str, what: str) -> None:
    require(value, field, what)
    if len(value) > PLUGIN_ID_MAX:
        raise invalid_argument(field, f"is longer than {PLUGIN_ID_MAX} characters")


def _settlement_duties(duties: Iterable[store_pb2.SettlementDuty], turn_id: str) -> None:
    owed: set[tuple[str, str]] = set()
    for index, duty in enumerate(duties):
        where = f"settlements[{index}]"
        for field, what in (("plugin_id", "the maintainer's plugin"), ("runtime_id", "the dimension maintainer runtime")):
            require(getattr(duty, field), f"{where}.{field}", what)
            if len(getattr(duty, field)) > PLUGIN_ID_MAX:
                raise invalid_argument(f"{where}.{field}", f"is longer than {PLUGIN_ID_MAX} characters")
        if duty.retry_from_turn_id and duty.retry_from_turn_id == turn_id:
            raise invalid_argument(f"{where}.retry_from_turn_id", "names this turn; a retry names the earlier turn whose receipt is open")
        if (duty.retry_from_turn_id, duty.runtime_id) in owed:
            raise invalid_argument(f"{where}.runtime_id", "one duty per runtime per source turn")
        owed.add((duty.retry_from_turn_id, duty.runtime_id))


def resolve_settlement(request: store_pb2.ResolveSettlementRequest) -> None:
    session_id(request.session_id)
    require(request.source_turn_id, "source_turn_id", "the turn whose receipt is open (DimensionSettlement.source_turn_id)")
    require(request.runtime_id, "runtime_id", "the maintainer runtime of the receipt")
    if request.resolution not in SETTLEMENT_RESOLUTIONS:
        raise invalid_argument("resolution", f"is {request.resolution!r}; use handled or skipped (a retry goes through the "
                                             "scheduler, which settles the receipt with CommitTurn)")


def _dataset_policies(policies: Iterable[store_pb2.DatasetPolicy]) -> None:
    governed: set[tuple[str, str]] = set()
    for index, policy in enumerate(policies):
        where = f"datasets[{index}]"
        require(policy.plugin_id, f"{where}.plugin_id", "the plugin that declared the dataset")
        require(policy.namespace, f"{where}.namespace", "the dataset name")
        if policy.namespace.startswith("_"):
            raise invalid_argument(f"{where}.namespace", "names starting with _ are reserved for the kernel")
        if (policy.plugin_id, policy.namespace) in governed:
            raise invalid_argument(f"{where}.namespace", f"dataset {policy.namespace} of {policy.plugin_id} is listed twice")
        governed.add((policy.plugin_id, policy.namespace))
        seen: set[str] = set()
        for position, kind in enumerate(policy.ops):
            if kind not in OPERATION_KINDS or kind in seen:
                raise invalid_argument(f"{where}.ops[{position}]", f"{kind!r}: use each of {', '.join(OPERATION_KINDS)} at most once")
            seen.add(kind)


def _unit_dependencies(dependencies: Sequence[store_pb2.UnitDependencies]) -> None:
    named: set[str] = set()
    for index, entry in enumerate(dependencies):
        require(entry.unit_runtime_id, f"dependencies[{index}].unit_runtime_id", "the unit's top-level runtime id")
        if entry.unit_runtime_id in named:
            raise invalid_argument(f"dependencies[{index}].unit_runtime_id", f"{entry.unit_runtime_id} is listed twice")
        named.add(entry.unit_runtime_id)
        for field, values in (("needs", entry.needs), ("read_from", entry.read_from)):
            for position, producer in enumerate(values):
                if not producer or producer == entry.unit_runtime_id:
                    raise invalid_argument(f"dependencies[{index}].{field}[{position}]", "name another unit's runtime id")
    _no_cycles(dependencies)


def _detached_jobs(specs: Iterable[store_pb2.DetachedJobSpec]) -> None:
    jobs: set[tuple[str, str]] = set()
    for index, spec in enumerate(specs):
        where = f"detached_jobs[{index}]"
        require(spec.plugin_id, f"{where}.plugin_id", "the detached runtime's plugin")
        require(spec.runtime_id, f"{where}.runtime_id", "the detached runtime")
        if (spec.plugin_id, spec.runtime_id) in jobs:
            raise invalid_argument(f"{where}.runtime_id", "one job per runtime per turn")
        jobs.add((spec.plugin_id, spec.runtime_id))
        for field in ("max_queue_ms", "max_execution_ms"):
            value = getattr(spec, field)
            if value < 0 or value > JOB_TIMEOUT_MAX_MS:
                raise invalid_argument(f"{where}.{field}", f"is {value}; use 0 (default) up to {JOB_TIMEOUT_MAX_MS}")


def _no_cycles(dependencies: Sequence[store_pb2.UnitDependencies]) -> None:
    edges = {entry.unit_runtime_id: [*entry.needs, *entry.read_from] for entry in dependencies}
    state: dict[str, int] = {}

    def visit(name: str, index: int) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise invalid_argument(f"dependencies[{index}]", f"dependency cycle through {name}")
        state[name] = 1
        for producer in edges.get(name, []):
            visit(producer, index)
        state[name] = 2

    for index, entry in enumerate(dependencies):
        visit(entry.unit_runtime_id, index)


def claim_job(request: store_pb2.ClaimDetachedJobRequest) -> None:
    if len(request.holder) > PLUGIN_ID_MAX:
        raise invalid_argument("holder", f"is longer than {PLUGIN_ID_MAX} characters")
    ttl_ms(request.lease_ttl_ms, 30_000, "lease_ttl_ms")
    if request.wait_ms < 0 or request.wait_ms > CLAIM_WAIT_MAX_MS:
        raise invalid_argument("wait_ms", f"is {request.wait_ms}; use 0 (answer at once) up to {CLAIM_WAIT_MAX_MS}")


def job_lease(job_id: str, lease_id: str) -> None:
    require(job_id, "job_id", "the id ClaimDetachedJob returned")
    require(lease_id, "lease_id", "the lease_id ClaimDetachedJob returned")


def job_id(value: str) -> None:
    require(value, "job_id", "a job's id, as ListDetachedJobs shows it")


def complete_job(request: store_pb2.CompleteDetachedJobRequest) -> None:
    job_lease(request.job_id, request.lease_id)
    if request.status not in JOB_STATUSES:
        raise invalid_argument("status", f"is {request.status!r}; use succeeded, failed, retry or queued (release)")


FAULTS_MAX = 256


def plugin_faults(request: store_pb2.RecordPluginFaultsRequest) -> None:
    session_id(request.session_id)
    if request.threshold < 1:
        raise invalid_argument("threshold", f"is {request.threshold}; at least 1 fault pauses a plugin")
    if request.window_ms < 1:
        raise invalid_argument("window_ms", f"is {request.window_ms}; the window is at least 1 ms")
    if len(request.faults) > FAULTS_MAX:
        raise invalid_argument("faults", f"holds {len(request.faults)}; report at most {FAULTS_MAX} at once")
    for index, fault in enumerate(request.faults):
        require(fault.plugin_id, f"faults[{index}].plugin_id", "the plugin whose handler failed")


def list_jobs(request: store_pb2.ListDetachedJobsRequest) -> None:
    for index, status in enumerate(request.statuses):
        if status not in JOB_STATES:
            raise invalid_argument(f"statuses[{index}]", f"is {status!r}; use one of {', '.join(JOB_STATES)}")


SIGNAL_KINDS = ("cancel", "interject")
SIGNAL_REASON_MAX = 2000
SIGNAL_TEXT_MAX = 4000


SIGNAL_WAIT_MAX_MS = 5_000


def signal_turn(request: store_pb2.SignalTurnRequest) -> None:
    session_id(request.session_id)
    if not 0 <= request.wait_ms <= SIGNAL_WAIT_MAX_MS:
        raise invalid_argument("wait_ms", f"is {request.wait_ms}; 0 to {SIGNAL_WAIT_MAX_MS}")
    if request.kind not in SIGNAL_KINDS:
        raise invalid_argument("kind", f"is {request.kind!r}; use one of {', '.join(SIGNAL_KINDS)}")
    if request.kind == "cancel":
        if request.text:
            raise invalid_argument("text", "is for interject signals; a cancel carries a reason")
        if len(request.reason) > SIGNAL_REASON_MAX:
            raise invalid_argument("reason", f"is longer than {SIGNAL_REASON_MAX} characters")
    else:
        if request.reason:
            raise invalid_argument("reason", "is for cancel signals; an interjection carries text")
        if not request.text.strip() or len(request.text) > SIGNAL_TEXT_MAX:
            raise invalid_argument("text", f"say 1-{SIGNAL_TEXT_MAX} characters (what the player interjects)")


# The longest TakeTurnSignals waits for a signal (one another store replica took is found when the wait ends).
TAKE_WAIT_MAX_MS = 2000


def take_signals(request: store_pb2.TakeTurnSignalsRequest) -> None:
    session_id(request.session_id)
    require(request.lease_id, "lease_id", "the lease AcquireTurnLease returned (only its holder takes the turn's signals)")
    if not 0 <= request.wait_ms <= TAKE_WAIT_MAX_MS:
        raise invalid_argument("wait_ms", f"is {request.wait_ms}; say 0-{TAKE_WAIT_MAX_MS} ms (0: answer at once)")

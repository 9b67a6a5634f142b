"""Who may call which method (docs/security.md, "Service identity"): one table for all five services.

A caller is the identity its client certificate names (shared/security/service_identity.py): one
of the services, or `operator` (the CLI's operator commands). `client` stands for the scheduler's
public callers, who need no certificate: the bearer token proves who they are
(shared/security/auth.py). A method in no row is refused; health and reflection are open.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.grpc_client import proto_methods

SERVICES = ("scheduler", "registry", "hooks", "gateway", "store")
OPERATOR = "operator"
CLIENT = "client"
# Identities a certificate can name (`client` is not one: it is anyone the bearer token admits).
IDENTITIES = (*SERVICES, OPERATOR)
OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.v1alpha.ServerReflection/", "/grpc.reflection.v1.ServerReflection/")


@dataclass(frozen=True)
class Rule:
    callers: frozenset[str]
    why: str


def _rule(why: str, *callers: str) -> Rule:
    return Rule(frozenset(callers), why)


TURN_PATH = _rule("the turn runner's own calls", "scheduler")
OPERATOR_ONLY = _rule("changes what code runs for everyone: an operator's decision", OPERATOR)
SCHEDULER_OR_OPERATOR = _rule("the scheduler's own calls; the operator's tools read them too", "scheduler", OPERATOR)

CLIENT_API = "covel.scheduler.v1.Scheduler"
# full service name -> {method: rule}; what the scheduler calls is what a turn needs, nothing else.
POLICY: dict[str, dict[str, Rule]] = {
    # Every method of the public API, one added later too: its bearer token and session ownership
    # (shared/security/auth.py, services/scheduler/session_access.py) decide, for every method alike.
    CLIENT_API: {
        method: _rule("the public client API: the bearer token's principal, and session ownership", CLIENT)
        for service, method, _ in proto_methods() if service == CLIENT_API
    },
    "covel.store.v1.TransactionalStore": {
        method: TURN_PATH
        for method in ("CreateSession", "GetSession", "EndSession", "RenameSession", "SetOpening", "AcquireTurnLease", "RenewTurnLease",
                       "ReleaseTurnLease", "SignalTurn", "TakeTurnSignals", "CommitTurn", "ListMessages", "GetTurn",
                       "GetRunningTurn", "ListPluginData", "UpdateSessionApprovals", "GetWorld", "SetSeatCharacter", "UpdateSessionPlugins", "PutLorebookEntry",
                       "DeleteLorebookEntry", "ListExports",
                       "ClaimDetachedJob", "RenewDetachedJob", "CompleteDetachedJob",
                       "ListSettlements", "ResolveSettlement", "ListInteractions", "ListSessions",
                       # The story's moves (services/store/story_line.py), passed on from the public API's session owners.
                       "SetSessionHead", "BranchSession",
                       # Seats' grants and guests (services/store/seat_grants.py), passed on from the session's owner.
                       "GrantSeat", "RedeemSeatGrant", "RevokeSeat")
    } | {
        # The fault breaker every hooks replica shares (services/store/plugin_faults.py).
        "RecordPluginFaults": _rule("the hooks service reports its handlers' faults", "hooks"),
        # The detached queue: the scheduler's API passes them on; `covel operator jobs` / `requeue` call them directly.
        "ListDetachedJobs": _rule("the scheduler passes on its clients' calls; the operator's tools read the queue", "scheduler", OPERATOR),
        "RequeueDetachedJob": _rule("the scheduler passes on an operator's call; the operator's tools call it too", "scheduler", OPERATOR),
        "AccessHookState": _rule("hook handlers' ctx.state, run by the hooks service; the scheduler keeps the kernel's own, the "
                                 "lorebook's timers (plugin `framework` only: services/store/hook_state.py)", "hooks", "scheduler"),
        "HookStateCalls": _rule("hook handlers' ctx.state on one stream the hooks service keeps open (AccessHookState's "
                                "calls, each checked as that method's)", "hooks"),
        # The hooks service reads a session's committed turns only to fill a plugin's tape mirror (provide_tape_store,
        # services/hooks/plugin_side/tape_mirror.py), for the session of the message:sent it handles; plugin code never holds the stub.
        "ListTurns": _rule("the turn runner's history; the hooks service fills a provide_tape_store mirror", "scheduler", "hooks"),
        "PutMemoryVectors": _rule("memory-search's index: the scheduler embeds and keeps the vectors", "scheduler"),
        "SearchMemoryVectors": _rule("memory-search's index: the scheduler ranks a session's records", "scheduler"),
        "ListPausedPlugins": _rule("the hooks service and the scheduler show the pauses; the operator's tools read them too",
                                   "scheduler", "hooks", OPERATOR),
        "ResetPluginFaults": _rule("the scheduler passes on a session owner's reset; an operator resets any", "scheduler", "hooks", OPERATOR),
        "SyncWorldData": _rule("the scheduler passes on a session owner's world data sync", "scheduler"),
        # The operator's override of a record (services/store/admin_plugin_data.py): no service writes through it.
        "AdminPutPluginData": _rule("an operator's override of plugin data, past the dataset's schema and ops: audited", OPERATOR),
        "AdminDeletePluginData": _rule("an operator's override of plugin data, past the dataset's schema and ops: audited", OPERATOR),
    },
    "covel.registry.v1.PluginRegistry": {
        "ListPlugins": _rule("the hooks service loads the catalogue's code; the scheduler's world generator reads the authoring "
                             "declarations", "hooks", "scheduler", OPERATOR),
        "WatchCatalogue": _rule("the hooks service reloads plugin code, the scheduler drops cached resolutions", "hooks", "scheduler"),
        "GetPlugin": _rule("an operator's look at one package", OPERATOR),
        "GetPlugins": SCHEDULER_OR_OPERATOR,
        "ResolveSessionPlugins": TURN_PATH,
        "ResolveConfirmedSessionPlugins": TURN_PATH,
        "ValidatePackage": _rule("imports a package's code to check it", OPERATOR),
        "InstallPackage": OPERATOR_ONLY,
        "Reload": OPERATOR_ONLY,
        "ImportWorld": _rule("writes a world every player sees into the operator's world folder: an operator's decision "
                             "(the scheduler passes on only an operator's call)", OPERATOR, "scheduler"),
        # Worlds (issue 20): the scheduler reads them for its clients and for CreateSession(world_id).
        "ListWorlds": SCHEDULER_OR_OPERATOR,
        "GetWorld": SCHEDULER_OR_OPERATOR,
        "ListPacks": SCHEDULER_OR_OPERATOR,
        "GetPluginPlan": SCHEDULER_OR_OPERATOR,
        "GetMediaFile": _rule("a world's or a webview's file, for the session owners the scheduler's GetMedia checked", "scheduler"),
        "GetWorldImport": _rule("a world's data, hidden data included, for the sessions the scheduler creates", "scheduler"),
    },
    "covel.hooks.v1.HookDispatcher": {
        **{method: TURN_PATH for method in ("Dispatch", "DispatchObserved", "TurnHooks", "ListTools", "CallTool", "CallExtension", "CallService", "EmitEvent",
                                            "ValidateForm", "CallAction", "AdmitMessage", "StreamModelAnswer")},
        "GetSubscriptions": SCHEDULER_OR_OPERATOR,
        "ListEventKeys": SCHEDULER_OR_OPERATOR,
        "ListPausedPlugins": SCHEDULER_OR_OPERATOR,
        "ResetPluginFaults": _rule("the scheduler passes on a session owner's reset; an operator resets any", "scheduler", OPERATOR),
        "Reload": OPERATOR_ONLY,
        "LoadApprovedPlugins": _rule("a session approved community plugins: the scheduler has their code loaded", "scheduler"),
    },
    "covel.gateway.v1.LlmGateway": {
        "Generate": _rule("spends the operator's model keys: turns only", "scheduler"),
        "GenerateOnce": _rule("spends the operator's model keys: turns only", "scheduler"),
        "ListSlots": SCHEDULER_OR_OPERATOR,
        "Embed": _rule("spends the operator's model keys: memory-search in turns only", "scheduler"),
        "TurnModelCalls": _rule("spends the operator's model keys: a turn's GenerateOnce and Embed calls", "scheduler"),
    },
}


def _check_table() -> None:
    """Refuse a misspelt method or caller at import: it would silently deny (or admit) nothing."""
    known = {(service, method) for service, method, _ in proto_methods()}
    unknown = [f"{service}/{method}" for service, methods in POLICY.items() for method in methods if (service, method) not in known]
    callers = {caller for methods in POLICY.values() for rule in methods.values() for caller in rule.callers}
    strangers = sorted(callers - {*IDENTITIES, CLIENT})
    if unknown or strangers:
        raise LookupError(f"shared/security/policy.py POLICY: no such method {unknown}, no such caller {strangers}")


_check_table()


def rule_of(path: str) -> Rule | None:
    """The rule of a call's `/package.Service/Method`; None: no row, so nobody may call it."""
    service, _, method = path.lstrip("/").partition("/")
    return POLICY.get(service, {}).get(method)


def is_open(path: str) -> bool:
    return path.startswith(OPEN_PREFIXES)


def unlisted_methods() -> list[str]:
    """Methods of our protos in no row of POLICY (refused to everyone); the tests keep this empty."""
    return [f"{service}/{method}" for service, method, _ in proto_methods()
            if service.startswith("covel.") and method not in POLICY.get(service, {})]

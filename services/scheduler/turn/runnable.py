"""What an execution runs with: the session its hooks see, the runtimes it can run, and the one
runtime RunManual or a detached job names. Pure: the turn runner feeds in what the registry said."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from covel.registry.v1 import registry_pb2
from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Package, Runtime
from services.scheduler.kinds import TriggerType
from services.scheduler.turn.selection import unavailable_reason
from shared.errors import failed_precondition, not_found
from shared.manifest import CompiledManifest
from shared.structs import from_struct, to_struct


def settings_with_defaults(session: store_pb2.Session, packages: Iterable[Package]) -> store_pb2.Session | None:
    """A copy of the session whose plugin_settings carry each package's contributes.settings
    defaults under the values the session set; None when no package declares a default it lacks."""
    filled: dict[str, dict] = {}
    for package in packages:
        declared = package.settings_by_key() or {}
        defaults = {key: item.default for key, item in declared.items() if item.default is not None}
        given = from_struct(session.plugin_settings[package.id]) if package.id in session.plugin_settings else {}
        if any(key not in given for key in defaults):
            filled[package.id] = {**defaults, **given}
    if not filled:
        return None
    copy = store_pb2.Session()
    copy.CopyFrom(session)
    for plugin_id, values in filled.items():
        copy.plugin_settings[plugin_id].CopyFrom(to_struct(values))
    return copy


def execution_session(session: store_pb2.Session, runnable: Sequence[str], packages: Iterable[Package]) -> store_pb2.Session:
    """The session as this execution's hooks and plugins see it: only the plugins that run now
    (hooks of the others stay silent too), with settings' manifest defaults where the session set
    none. The session itself when neither changes anything."""
    seen = session
    if list(runnable) != list(session.active_plugins):
        seen = store_pb2.Session()
        seen.CopyFrom(session)
        del seen.active_plugins[:]
        seen.active_plugins.extend(runnable)
    with_defaults = settings_with_defaults(seen, packages)
    return with_defaults if with_defaults is not None else seen


def loaded_runtimes(packages: Iterable[Package]) -> list[Runtime]:
    return [runtime for package in packages if package.state == registry_pb2.PLUGIN_STATE_LOADED for runtime in package.runtimes]


def concealed_runtimes(manifests: Mapping[str, CompiledManifest]) -> set[str]:
    """Runtimes with io.concealed: the client sees none of what they produce."""
    return {runtime_id for runtime_id, manifest in manifests.items() if manifest.io.concealed}


def named_runtime(runtime_id: str, *, detached: bool, runtimes: list[Runtime], manifests: Mapping[str, CompiledManifest],
                  sitting: Iterable[Package], unavailable: Mapping[str, registry_pb2.RejectedPlugin]) -> Runtime | None:
    """The one runtime a detached job or RunManual names (None for a turn that schedules its own),
    or FAILED_PRECONDITION / NOT_FOUND saying why it cannot run now."""
    if runtime_id:
        gated = next((unavailable[p.id] for p in sitting for r in p.runtimes if r.runtime_id == runtime_id), None)
        if gated is not None:
            raise failed_precondition(f"runtime {runtime_id} does not run now: {unavailable_reason(gated)}",
                                      reason="RUNTIME_NOT_RUNNABLE", subject=f"runtimes/{runtime_id}")
    if detached:
        return _detached_runtime(runtimes, runtime_id)
    return _manual_runtime(runtimes, manifests, runtime_id) if runtime_id else None


def _manual_runtime(runtimes: list[Runtime], manifests: Mapping[str, CompiledManifest], runtime_id: str) -> Runtime:
    """The runtime RunManual names: in the session's plugins, and triggered manually."""
    runtime = next((r for r in runtimes if r.runtime_id == runtime_id), None)
    if runtime is None:
        raise not_found(f"runtime {runtime_id} is not in this session's plugins", "covel.scheduler.v1.Runtime", runtime_id,
                        reason="RUNTIME_NOT_FOUND")
    trigger = manifests[runtime_id].schedule.trigger.type
    if trigger != TriggerType.MANUAL or manifests[runtime_id].schedule.subagent_only:
        raise failed_precondition(
            f"runtime {runtime_id} is triggered by {trigger}; only schedule.trigger.type: manual runtimes run on request",
            reason="RUNTIME_NOT_MANUAL", subject=f"runtimes/{runtime_id}")
    return runtime


def _detached_runtime(runtimes: list[Runtime], runtime_id: str) -> Runtime:
    """The runtime a detached job names, if its plugin still runs in the session."""
    runtime = next((r for r in runtimes if r.runtime_id == runtime_id), None)
    if runtime is None:
        raise failed_precondition(f"runtime {runtime_id} of this detached job is no longer in the session's runnable plugins",
                                  reason="RUNTIME_NOT_RUNNABLE", subject=f"runtimes/{runtime_id}")
    return runtime

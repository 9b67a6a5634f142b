"""Committed plugin data a turn reads, asked for with its lease (store.proto TurnReads.plugin_data).

Runtimes read a plugin's committed data once per turn (TurnShared.read_once, `plugin-data/<plugin>/<namespace>`).
What the session's previous turn on this replica read is what the next lease asks for: the store answers
those reads in the same reader unit as the lease, and they seed the turn's reads, so a turn that reads
what its previous turn read makes no ListPluginData call. A turn that reads something else reads it then.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from covel.store.v1 import store_pb2
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.recently_used import RecentlyUsed
from shared.structs import from_value

PREFIX = "plugin-data/"
# As the store allows one lease (store validation PLUGIN_DATA_SCOPES_MAX).
SCOPES_MAX = 64
REMEMBERED_SESSIONS = 10_000


def read_name(plugin_id: str, namespace: str | None) -> str:
    """The TurnShared.read_once name of one plugin's committed data (a namespace, or all of it)."""
    return f"{PREFIX}{plugin_id}/{namespace or ''}"


def entries_by_address(entries: Iterable[store_pb2.PluginDataEntry]) -> dict[tuple[str, str], Any]:
    """(namespace, key) -> value, as PluginDataViews.committed reads them."""
    return {(entry.namespace, entry.key): from_value(entry.value) for entry in entries}


def scopes_read(shared: TurnShared) -> list[store_pb2.PluginDataScope]:
    """The plugin data scopes this turn read (the first SCOPES_MAX)."""
    scopes = []
    for name in shared.read_names():
        if name.startswith(PREFIX):
            plugin_id, _, namespace = name.removeprefix(PREFIX).partition("/")
            scopes.append(store_pb2.PluginDataScope(plugin_id=plugin_id, namespace=namespace))
    return scopes[:SCOPES_MAX]


def seed(shared: TurnShared, reads: list[store_pb2.PluginDataRead]) -> None:
    """The lease's reads as the turn's own: a runtime that reads one of these scopes reads it from here."""
    for read in reads:
        name = read_name(read.scope.plugin_id, read.scope.namespace)
        shared.seed(name, entries_by_address(read.entries))
        shared.revisions[name] = read.revision


def read_checks(shared: TurnShared) -> store_pb2.ReadChecks:
    """What the turn read of the committed state, as the revisions the store answered (a detached job's commit checks
    them): the world, and every plugin data scope its runtimes read."""
    checks = store_pb2.ReadChecks(world_revision=shared.world.revision if shared.world is not None else "")
    for name in shared.read_names():
        if name.startswith(PREFIX) and name in shared.revisions:
            plugin_id, _, namespace = name.removeprefix(PREFIX).partition("/")
            checks.plugin_data.add(scope=store_pb2.PluginDataScope(plugin_id=plugin_id, namespace=namespace), revision=shared.revisions[name])
    return checks


class LastScopes:
    """Per session, what its latest turn here read: what the next turn asks for with its lease."""

    def __init__(self, capacity: int = REMEMBERED_SESSIONS) -> None:
        self._scopes: RecentlyUsed[str, list[store_pb2.PluginDataScope]] = RecentlyUsed(capacity)

    def get(self, session_id: str) -> list[store_pb2.PluginDataScope]:
        return list(self._scopes.get(session_id) or [])

    def note(self, session_id: str, scopes: list[store_pb2.PluginDataScope]) -> None:
        self._scopes.put(session_id, scopes)

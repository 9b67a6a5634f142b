"""ctx.plugin_data of one execution: committed values, upstream runtimes' buffered writes, its own writes."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.scheduler.kinds import ProposalType
from shared.plugin_data.execution_view import BufferedWrite, ExecutionView
from shared.plugin_data.operations import DELETED, MISSING, apply_operations
from shared.plugin_sdk import json_copy

LoadNamespace = Callable[[str | None], Awaitable[dict[tuple[str, str], Any]]]


@dataclass
class PluginDataView:
    """ctx.plugin_data, with the spec's in-execution visibility.

    Reads see the committed value, then the buffered writes of this plugin's completed upstream
    runtimes in commit order, then this runtime's own writes (shared/plugin_data). Each read
    records which upstream runtimes it now depends on; writes become proposals of this runtime.
    """

    plugin_id: str
    load_committed: LoadNamespace
    upstream: list[BufferedWrite] = field(default_factory=list)
    own: list[BufferedWrite] = field(default_factory=list)
    read_from: set[str] = field(default_factory=set)
    _committed: dict[tuple[str, str], Any] = field(default_factory=dict)
    _loaded: set[str | None] = field(default_factory=set)

    async def _view(self, namespace: str | None) -> ExecutionView:
        if namespace not in self._loaded and None not in self._loaded:
            self._committed.update(await self.load_committed(namespace))
            self._loaded.add(namespace)
        return ExecutionView(self._committed, self.upstream, self.own)

    async def get(self, namespace: str, key: str, default: Any = None) -> Any:
        value, depends = (await self._view(namespace)).get(namespace, key)
        self.read_from |= depends
        return default if value is MISSING else json_copy(value)

    async def list(self, namespace: str | None = None) -> dict[str, Any]:
        """{key: value} of one namespace, or {"namespace/key": value} of all this plugin's data."""
        entries, depends = (await self._view(namespace)).list(namespace)
        self.read_from |= depends
        if namespace is not None:
            return {key: json_copy(value) for (_, key), value in entries.items()}
        return {f"{ns}/{key}": json_copy(value) for (ns, key), value in entries.items()}

    def buffer(self, kind: str, payload: dict[str, Any]) -> None:
        """One plugin-data write of this runtime (set, delete or update), committed with its unit."""
        namespace, key = payload.get("namespace"), payload.get("key")
        if not isinstance(namespace, str) or not namespace or not isinstance(key, str) or not key:
            raise ValueError("plugin_data: namespace and key are non-empty strings")
        self.own.append(BufferedWrite(self.plugin_id, kind, json_copy(payload)))

    async def set(self, namespace: str, key: str, value: Any) -> None:
        self.buffer(ProposalType.PLUGIN_DATA, {"namespace": namespace, "key": key, "value": value})

    async def delete(self, namespace: str, key: str) -> None:
        self.buffer(ProposalType.PLUGIN_DATA_DELETE, {"namespace": namespace, "key": key})

    async def update(self, namespace: str, key: str, operations: Sequence[dict[str, Any]]) -> Any:
        """Apply operations (set, merge, inc, append, insert, remove, upsertItem, delete); returns the new value."""
        current = await self.get(namespace, key, MISSING)
        value = apply_operations(current, list(operations))  # raises OperationError early, like the commit would
        self.buffer(ProposalType.PLUGIN_DATA_UPDATE, {"namespace": namespace, "key": key, "operations": list(operations)})
        return None if value in (MISSING, DELETED) else json_copy(value)

    @property
    def writes(self) -> builtins.list[dict[str, Any]]:  # builtins: `list` here is the method above
        return [{"type": write.type, "payload": dict(write.payload)} for write in self.own]

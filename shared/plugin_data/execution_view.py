"""The in-execution view of a plugin's data, as a pure function (spec: 执行内的插件数据可见性).

Before a turn commits, a runtime reading its plugin's data sees: the committed value, then the
buffered writes of the same plugin's completed upstream runtimes in commit order, then its own
buffered writes. `plugin.data.update` operations are computed with the same code the commit
uses (shared/plugin_data/operations.py), so the view and the committed value agree.

Reads also give their read dependencies (the upstream runtimes the reader now depends on; the
scheduler sends them as CommitTurnRequest.dependencies[].read_from):
- get(namespace, key) depends only on upstream writes that still affect the value: writes
  before the last whole write of the key (a set or a delete) do not count, so a runtime that
  set or deleted the key itself before reading depends on no upstream;
- list(namespace) depends on every upstream runtime that wrote that namespace; list() without
  a namespace on every upstream runtime that wrote any plugin data.

The caller decides which writes are visible (same plugin, completed and successful upstream,
not siblings of the same layer, nested results before their parent) and passes them in order;
this module only stacks them. Like operations.py it imports nothing but the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.plugin_data.operations import DELETED, MISSING, apply_operations

Address = tuple[str, str]


@dataclass(frozen=True)
class BufferedWrite:
    """A plugin-data proposal not committed yet: its runtime (the unit it belongs to), type and payload."""

    runtime_id: str
    type: str
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class _EntryWrite:
    runtime_id: str
    # "set", "delete" or "update"
    kind: str
    namespace: str
    key: str
    value: Any = None
    operations: tuple[Any, ...] = ()
    upstream: bool = True


def _expand(write: BufferedWrite, upstream: bool) -> list[_EntryWrite]:
    payload = write.payload
    if write.type == "plugin.data":
        return [_EntryWrite(write.runtime_id, "set", payload["namespace"], payload["key"], payload.get("value"), upstream=upstream)]
    if write.type == "plugin.data.batch":
        return [
            _EntryWrite(write.runtime_id, "set", entry["namespace"], entry["key"], entry.get("value"), upstream=upstream)
            for entry in payload.get("entries", [])
        ]
    if write.type == "plugin.data.delete":
        return [_EntryWrite(write.runtime_id, "delete", payload["namespace"], payload["key"], upstream=upstream)]
    if write.type == "plugin.data.update":
        return [
            _EntryWrite(write.runtime_id, "update", payload["namespace"], payload["key"], operations=tuple(payload.get("operations", [])), upstream=upstream)
        ]
    return []


class ExecutionView:
    def __init__(self, committed: Mapping[Address, Any], upstream: Iterable[BufferedWrite], own: Iterable[BufferedWrite] = ()) -> None:
        self._committed = dict(committed)
        self._writes = [entry for write in upstream for entry in _expand(write, True)]
        self._writes += [entry for write in own for entry in _expand(write, False)]

    def _value(self, address: Address) -> tuple[Any, set[str]]:
        writes = [write for write in self._writes if (write.namespace, write.key) == address]
        last_whole = max((index for index, write in enumerate(writes) if write.kind in ("set", "delete")), default=-1)
        value = self._committed.get(address, MISSING)
        for write in writes:
            if write.kind == "set":
                value = write.value
            elif write.kind == "delete":
                value = MISSING
            else:
                value = apply_operations(value, list(write.operations))
                if value is DELETED:
                    value = MISSING
        depends = {write.runtime_id for index, write in enumerate(writes) if write.upstream and index >= last_whole}
        return value, depends

    def get(self, namespace: str, key: str) -> tuple[Any, set[str]]:
        """The value (operations.MISSING when there is none) and the upstream runtimes it depends on.

        Raises operations.OperationError when a buffered update cannot apply (the early check).
        """
        return self._value((namespace, key))

    def list(self, namespace: str | None = None) -> tuple[dict[Address, Any], set[str]]:
        addresses = {address for address in self._committed if namespace is None or address[0] == namespace}
        addresses |= {(write.namespace, write.key) for write in self._writes if namespace is None or write.namespace == namespace}
        entries: dict[Address, Any] = {}
        for address in sorted(addresses):
            value, _ = self._value(address)
            if value is not MISSING:
                entries[address] = value
        depends = {write.runtime_id for write in self._writes if write.upstream and (namespace is None or write.namespace == namespace)}
        return entries, depends

"""operations@1 of a retried turn (spec: a retry's seeds): the operations its source turn committed come first, before
the ones this execution stages, so a runtime recognises what it already did (a roll, a reveal) instead of doing it
again; they are never written again and add no commit dependency.

A committed turn keeps its committable operations in its trace, one entry each (`code` "operation", its `unit`);
the store then lists the units it discarded, whose operations did not commit and are not seeds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from covel.store.v1 import store_pb2
from shared.structs import from_struct

OPERATION_ENTRY = "operation"


@dataclass(frozen=True)
class RetrySource:
    """RetryTurn: the committed turn run again (ctx.execution.sourceTurnId) and its first version; the store moves the
    story's head to the turn before it with the lease (services/store/story_line.py)."""

    turn_id: str
    version_of: str
    # The operations@1 values the version committed (committed_operations): this execution's seeds.
    operations: tuple[dict[str, Any], ...] = ()


def operation_entries(operations: Iterable[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """(unit, operations@1 value) pairs as the trace entries a commit keeps."""
    return [{"code": OPERATION_ENTRY, "unit": unit, **value} for unit, value in operations]


def committed_operations(turn: store_pb2.Turn) -> tuple[dict[str, Any], ...]:
    """The operations@1 values `turn` committed, in call order."""
    discarded = {unit.unit_runtime_id for unit in turn.discarded_units}
    entries = (from_struct(entry) for entry in turn.trace)
    return tuple({key: value for key, value in entry.items() if key not in ("code", "unit")} for entry in entries
                 if entry.get("code") == OPERATION_ENTRY and entry.get("unit") not in discarded)

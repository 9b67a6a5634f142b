"""Dimension settlement: after a story turn, each dimension maintainer (an agent whose finishWith is
update-dimensions) owes the turn a settlement, a dimension.update of its own that commits with the turn
(`updates: []` when nothing changed). The scheduler tells the store what each owed (SettlementDuty); the store
keeps an open receipt for one that did not settle. Before the next player action the kernel retries an open
receipt once by itself (a turn of origin "settlement" that runs the maintainer alone on the source turn's
inputs); a receipt still open then blocks play until ResolveSettlement retries, or closes it as handled or skipped.
"""

from __future__ import annotations

from collections.abc import Iterable

from covel.store.v1 import store_pb2
from services.scheduler.agent.dimension_tools import UPDATE_DIMENSIONS
from services.scheduler.execution.origins import TurnOrigin
from services.scheduler.execution.outcome import OutcomeStatus
from services.scheduler.turn.state import TurnState
from shared.errors import ServiceError, failed_precondition, invalid_argument, not_found
from shared.manifest import CompiledManifest
from shared.structs import to_struct

# The origin of a turn that retries an open receipt.
SETTLEMENT_ORIGIN = TurnOrigin.SETTLEMENT
# Turns that must not start while a receipt is open: the player's, and the story's own continuations.
STORY_ORIGINS = (TurnOrigin.PLAYER, TurnOrigin.CONTINUATION)
# ResolveSettlement's resolutions: run the maintainer again, or close the receipt as it is.
RETRY = "retry"
RESOLUTIONS = (RETRY, "handled", "skipped")


def is_maintainer(manifest: CompiledManifest) -> bool:
    return manifest.agent is not None and manifest.agent.finish_with == UPDATE_DIMENSIONS


def duties(run: TurnState) -> list[store_pb2.SettlementDuty]:
    """What the turn's maintainers owed: those the schedule picked in a story turn of a world with dimensions,
    or the one a settlement retry runs."""
    if run.shared.world is None or not run.shared.world.dimensions:
        return []
    owed = []
    for runtime_id in run.scheduled:
        manifest = run.shared.manifests.get(runtime_id)
        if manifest is None or not is_maintainer(manifest):
            continue
        outcome = run.outcomes.get(runtime_id)
        error = "it did not run" if outcome is None else "" if outcome.status == OutcomeStatus.SUCCESS else f"it {outcome.status}: {outcome.reason}"
        owed.append(store_pb2.SettlementDuty(plugin_id=manifest.plugin_id, runtime_id=runtime_id, error=error,
                                             input=to_struct({"inputs": run.bound_inputs.get(runtime_id) or {}}),
                                             retry_from_turn_id=run.retry_from_turn_id))
    return owed


def open_receipts(world: store_pb2.GetWorldResponse | None) -> list[store_pb2.DimensionSettlement]:
    return [receipt for receipt in (world.pending_settlements if world is not None else []) if receipt.status == "pending"]


def to_retry(receipts: list[store_pb2.DimensionSettlement]) -> list[store_pb2.DimensionSettlement]:
    """The receipts the kernel retries by itself before the next action: those nobody retried yet."""
    return [receipt for receipt in receipts if receipt.attempts == 0]


def blocked(receipts: list[store_pb2.DimensionSettlement]) -> ServiceError:
    """FAILED_PRECONDITION for an action that waits on open receipts: which, why, and what to do."""
    first = receipts[0]
    listed = "; ".join(f"turn {r.source_logical_turn} ({r.source_turn_id}) by {r.runtime_id}: {r.last_error or 'not settled'}"
                       for r in receipts[:3])
    more = f" and {len(receipts) - 3} more" if len(receipts) > 3 else ""
    return failed_precondition(
        f"the world's dimensions are not settled after {listed}{more}; the next action waits for them. Call "
        f"ResolveSettlement(session_id, source_turn_id={first.source_turn_id!r}, runtime_id={first.runtime_id!r}) with "
        "resolution 'retry' to run the maintainer again, or 'handled' / 'skipped' to close it as it is",
        reason="SETTLEMENT_OPEN", subject=f"settlements/{first.source_turn_id}/{first.runtime_id}")


def check_resolution(resolution: str) -> None:
    if resolution not in RESOLUTIONS:
        raise invalid_argument("resolution", f"name one: {', '.join('SETTLEMENT_RESOLUTION_' + r.upper() for r in RESOLUTIONS)}")


def find_receipt(receipts: Iterable[store_pb2.DimensionSettlement], source_turn_id: str, runtime_id: str) -> store_pb2.DimensionSettlement:
    found = next((r for r in receipts if r.source_turn_id == source_turn_id and r.runtime_id == runtime_id), None)
    if found is None:
        raise not_found(f"no settlement receipt of turn {source_turn_id} by {runtime_id} in this session (ListSettlements shows them)",
                        "covel.scheduler.v1.DimensionSettlement", f"{source_turn_id}/{runtime_id}", reason="SETTLEMENT_NOT_FOUND")
    return found


def check_open(receipt: store_pb2.DimensionSettlement) -> None:
    if receipt.status != "pending":
        raise failed_precondition(f"the receipt of turn {receipt.source_turn_id} by {receipt.runtime_id} is already {receipt.status}; "
                                  "a closed receipt is never settled again", reason="SETTLEMENT_CLOSED",
                                  subject=f"settlements/{receipt.source_turn_id}/{receipt.runtime_id}")



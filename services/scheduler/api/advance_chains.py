"""The auto-advance chains of the submits running here, by session: Cancel stops them (the player stops advancing)."""

from __future__ import annotations

from services.scheduler.turn.request import AdvanceStop


class AdvanceChains:
    def __init__(self) -> None:
        # session id -> the stop flags of its auto-advance chains
        self._chains: dict[str, set[AdvanceStop]] = {}

    def open(self, session_id: str) -> AdvanceStop:
        """A new chain's stop flag, set by `stop` until the chain is closed."""
        stop = AdvanceStop()
        self._chains.setdefault(session_id, set()).add(stop)
        return stop

    def close(self, session_id: str, stop: AdvanceStop) -> None:
        chains = self._chains.get(session_id, set())
        chains.discard(stop)
        if not chains:
            self._chains.pop(session_id, None)

    def stop(self, session_id: str, reason: str) -> bool:
        """Stop every chain of the session; whether there was any."""
        chains = self._chains.get(session_id, set())
        for stopped in chains:
            stopped.set(reason)
        return bool(chains)

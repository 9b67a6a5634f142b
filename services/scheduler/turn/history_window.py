"""How much of the conversation log a turn reads (store.proto HistoryWindow), asked for with its lease.

The prompts read the last `maxTurns` player turns after the latest summary (agent/context.py);
history compaction measures everything after it (turn/compaction.py). So a turn reads from the
latest summary on, and, unless a history.compact@2 provider runs, only the player turns its agents
read: the turn's cost stays flat however long the story grows.

The lease is taken before the turn knows its plugins, so the window asked for is the one the
session's previous turn on this replica needed (everything since the summary when there was none);
a turn that needs more than it got reads the log again (`covers`).
"""

from __future__ import annotations

from collections.abc import Mapping

from services.scheduler.catalogue import Package
from services.scheduler.recently_used import RecentlyUsed
from services.scheduler.turn.compaction import provider_of
from shared.manifest import CompiledManifest

# HistoryWindow.player_turns 0: every player turn since the latest summary.
SINCE_SUMMARY = 0
# Sessions whose last window this replica remembers; past it the oldest go (they read SINCE_SUMMARY once).
REMEMBERED_SESSIONS = 10_000


def player_turns_needed(packages: Mapping[str, Package], manifests: Mapping[str, CompiledManifest], default_max_turns: int,
                        *, compacts: bool) -> int:
    """The window this turn's runtimes read: SINCE_SUMMARY when it may compact (compaction weighs the
    whole log after the summary), else the most player turns any of its agents reads, at least one
    (the latest player input; an agent with maxTurns 0 reads the turn it continues)."""
    if compacts and provider_of(packages):
        return SINCE_SUMMARY
    needed = 1
    for manifest in manifests.values():
        if manifest.agent is None:
            continue
        window = manifest.agent.history
        max_turns = window.max_turns if window is not None and window.max_turns is not None else default_max_turns
        needed = max(needed, max_turns)
    return needed


def covers(read: int, needed: int) -> bool:
    """Whether a window of `read` player turns holds one of `needed` (SINCE_SUMMARY holds every other)."""
    return read == SINCE_SUMMARY or (needed != SINCE_SUMMARY and needed <= read)


class LastWindows:
    """Per session (or per runtime of a session, for a detached job's or RunManual's runs: the runner's reads key), the
    window its latest turn here needed: what the next turn of the same key asks for with its lease."""

    def __init__(self, capacity: int = REMEMBERED_SESSIONS) -> None:
        self._windows: RecentlyUsed[str, int] = RecentlyUsed(capacity)

    def get(self, key: str) -> int:
        window = self._windows.get(key)
        return SINCE_SUMMARY if window is None else window

    def note(self, key: str, player_turns: int) -> None:
        self._windows.put(key, player_turns)

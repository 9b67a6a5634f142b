"""Why a turn runs (its origin), as recorded with the turn and mapped onto the public TurnOrigin."""

from __future__ import annotations

from enum import StrEnum


class TurnOrigin(StrEnum):
    PLAYER = "player"
    CONTINUATION = "continuation"
    MANUAL = "manual"
    BACKGROUND = "background"
    SETTLEMENT = "settlement"
    ACTION = "action"
    RESUME = "resume"


# The turns an interjection may join: a player's, and what continues it with the player watching (the store keeps
# the same rule for a signal left for another replica: services/store/turn_signals.py HEARS_INTERJECTIONS).
HEARS_INTERJECTIONS = frozenset({TurnOrigin.PLAYER, TurnOrigin.CONTINUATION, TurnOrigin.RESUME})

# ctx.execution.origin of a nested execution (ctx.recursive_call): not a turn's origin.
RECURSIVE_EXECUTION = "recursive"

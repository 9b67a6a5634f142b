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


# ctx.execution.origin of a nested execution (ctx.recursive_call): not a turn's origin.
RECURSIVE_EXECUTION = "recursive"

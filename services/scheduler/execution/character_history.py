"""ctx.history_for(character_id, limit=): CharacterHistory, the story a character witnessed (the committed story
messages whose presentCharacterIds name it), newest `limit` oldest first, from the history the turn read (the
scheduler's history window: COVEL_SCHEDULER_HISTORY_MAX_TURNS). A character-actor@1 subagent is sent the same
story (execution/character_brief.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from covel.common.v1 import common_pb2
from services.scheduler.execution.character_brief import witnessed_messages

DEFAULT_LIMIT = 20
MOST = 200


def character_history(history: list[common_pb2.Message], characters: Iterable[dict[str, Any]], character_id: Any,
                      limit: Any = None) -> dict[str, Any]:
    """{characterId, entries: [{turnId, seq, text}], more}: `more` when older witnessed story was left out.
    ValueError for a bad argument, LookupError for a character the execution's ctx.world does not have."""
    if not isinstance(character_id, str) or not character_id:
        raise ValueError("history_for(character_id): the id of a character of ctx.world.characters")
    count = DEFAULT_LIMIT if limit is None else limit
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MOST:
        raise ValueError(f"history_for({character_id!r}, limit={limit!r}): limit is an integer from 1 to {MOST}")
    if all(character.get("id") != character_id for character in characters):
        raise LookupError(f"history_for({character_id!r}): no such character in ctx.world.characters")
    witnessed = witnessed_messages(history, character_id)
    kept = witnessed[-count:]
    return {"characterId": character_id, "entries": [{"turnId": m.turn_id, "seq": m.seq, "text": m.text} for m in kept],
            "more": len(witnessed) > len(kept)}

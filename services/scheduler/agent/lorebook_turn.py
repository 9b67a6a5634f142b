"""The lorebook in a story's prompt, each turn (docs/worlds.md, "Lorebook"): the session's entries evaluated by
their activation rules (lorebook_activation.py) over the history window and the player's input, the entries that
came up placed where their rules say, and the turn's record of it for the trace.

- `beforeChar` entries: one system segment `lorebook`, before the plugins' segments (where the characters are);
  `afterChar` ones: one system segment `lorebook-after`, after them; `atDepth` ones: a message at that depth of
  the history with their role (one per depth and role). In each, order ascending.
- Card macros in the content are expanded (shared/card_macros.py): `{{char}}` is the world's first character that
  is not a player's, `{{user}}` the player's character (or "you").
- Timed effects outlive the turn in the store's session state of `framework` (key `lorebook.timers`), as
  {turn, before, after}: a turn run again (the same logical turn) starts from the same `before`, so a seed gives
  the same activations however often a turn is retried. A lorebook without `sticky`, `cooldown` or `once` costs
  no store call. The state is bounded like any session state (64 KiB): past it, the timers start afresh (logged).
- Draws (probability, inclusion groups, macros) come from the session's random for the turn (COVEL_RANDOM_SEED).
"""

from __future__ import annotations

from typing import Any

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.agent.lorebook_activation import Activation, Entry, activate
from services.scheduler.execution.framework_trace import LOREBOOK_ACTIVATED, framework_entry
from shared.card_macros import expand
from shared.logs import get_logger
from shared.lorebook_rules import activation_from_proto, settings_from_proto
from shared.plugin_sdk.seeded_random import seeded_random
from shared.structs import from_struct, from_value, to_value

log = get_logger(component="lorebook")
STATE_PLUGIN, STATE_KEY = "framework", "lorebook.timers"
HEADINGS = {"en": "Lorebook (what this world knows; use what fits the scene):", "zh": "世界设定（这个世界已知的事；用得上的就用）："}
TIMED_RULES = ("sticky", "cooldown", "once")


def session_entries(world: store_pb2.GetWorldResponse) -> list[Entry]:
    return [Entry(entry.owner, entry.id, entry.content, title=entry.title, keys=tuple(entry.keys), constant=entry.constant,
                  disabled=entry.disabled, rules=activation_from_proto(entry.activation)) for entry in world.lorebook]


def window_texts(history: list[common_pb2.Message], player_message: str) -> list[str]:
    texts = [message.text for message in history if message.role in ("player", "story") and message.text]
    return [*texts, player_message] if player_message else texts


class LorebookTurn:
    """One story runtime's lorebook for one turn: `evaluate` once, then `segments`, `trace_entry`."""

    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, session_id: str, logical_turn: int, runtime_id: str) -> None:
        self._store, self._session_id, self._turn, self._runtime_id = store, session_id, logical_turn, runtime_id
        self._random = seeded_random(logical_turn, "framework:lorebook", session_id)
        self.activation: Activation | None = None
        self._names = ("", "you")

    async def evaluate(self, world: store_pb2.GetWorldResponse | None, history: list[common_pb2.Message], player_message: str) -> None:
        if world is None or not world.lorebook:
            return
        entries = session_entries(world)
        settings = settings_from_proto(world.lorebook_settings) if world.HasField("lorebook_settings") else {}
        timed = {entry.key for entry in entries if not entry.disabled and any(entry.rule(rule) for rule in TIMED_RULES)}
        stored = await self._timers() if timed else {}  # no timed rule: no state to read or keep (no store call)
        before = stored.get("before", {}) if stored.get("turn") == self._turn else stored.get("after", {})
        self.activation = activate(entries, settings, window_texts(history, player_message), self._turn, before, self._random.float)
        self._names = _names(world)
        if timed:
            after = {key: state for key, state in self.activation.timers.items() if key in timed}
            await self._save({"turn": self._turn, "before": before, "after": after})

    def segments(self, locale: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(segments before the plugins' ones, segments after them)."""
        if self.activation is None or not self.activation.entries:
            return [], []
        heading = HEADINGS["zh" if locale.startswith("zh") else "en"]
        char, user = self._names
        lines: dict[Any, list[str]] = {}
        for entry in self.activation.entries:
            position = entry.rule("position")
            where = ("depth", entry.rule("depth"), entry.rule("role")) if position == "atDepth" else position
            content = expand(entry.content, char, user, self._random.float)
            lines.setdefault(where, []).append(f"- {entry.title}: {content}" if entry.title else f"- {content}")
        first: list[dict[str, Any]] = []
        last: list[dict[str, Any]] = []
        if "beforeChar" in lines:
            first.append({"id": "lorebook", "pluginId": "framework", "position": "system", "content": "\n".join([heading, *lines["beforeChar"]])})
        if "afterChar" in lines:
            last.append({"id": "lorebook-after", "pluginId": "framework", "position": "system", "content": "\n".join(lines["afterChar"])})
        for where, texts in lines.items():
            if isinstance(where, tuple):
                _, depth, role = where
                last.append({"id": f"lorebook-depth-{depth}-{role}", "pluginId": "framework", "position": {"depth": depth},
                             "role": role, "content": "\n".join(texts)})
        return first, last

    def trace_entry(self) -> common_pb2.HookTraceEntry | None:
        if self.activation is None:
            return None
        return framework_entry(LOREBOOK_ACTIVATED, "ok", self._runtime_id, self.activation.trace(self._turn))

    async def _timers(self) -> dict[str, Any]:
        try:
            reply = await self._store.AccessHookState(store_pb2.AccessHookStateRequest(
                session_id=self._session_id, plugin_id=STATE_PLUGIN, op="get", key=STATE_KEY))
        except Exception as error:  # the timers are the turn's helpers, not its condition: start afresh
            log.warning("lorebook.timers_unread", session_id=self._session_id, error=str(error))
            return {}
        value = from_value(reply.value) if reply.found else {}
        if not isinstance(value, dict):
            return {}
        # numbers come back as JSON's; the timers count whole turns
        return {"turn": value.get("turn"), **{part: {key: {name: int(number) for name, number in state.items()}
                                                     for key, state in (value.get(part) or {}).items()} for part in ("before", "after")}}

    async def _save(self, state: dict[str, Any]) -> None:
        try:
            await self._store.AccessHookState(store_pb2.AccessHookStateRequest(
                session_id=self._session_id, plugin_id=STATE_PLUGIN, op="set", key=STATE_KEY, value=to_value(state)))
        except Exception as error:
            log.warning("lorebook.timers_unsaved", session_id=self._session_id, error=str(error))


def _names(world: store_pb2.GetWorldResponse) -> tuple[str, str]:
    characters = [from_struct(character.data) for character in world.characters]
    char = next((str(c.get("name", "")) for c in characters if c.get("type") != "player" and c.get("name")), "")
    user = next((str(c.get("name", "")) for c in characters if c.get("type") == "player" and c.get("name")), "you")
    return char, user

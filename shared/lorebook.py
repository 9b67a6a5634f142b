"""Lorebook entries (store.proto LorebookEntry), checked the same way by the scheduler (a player's edits) and the
store (every write)."""

from __future__ import annotations

import re

from covel.store.v1 import store_pb2
from shared.errors import invalid_argument
from shared.lorebook_keys import BadKey, regex_of

OWNER = re.compile(r"^(world|player|plugin:[a-z0-9][a-z0-9._-]{0,63})$")
ID_MAX = 200
TITLE_MAX = 200
KEYS_MAX = 32
KEY_MAX = 100
CONTENT_MAX = 8000
ENTRIES_MAX = 2000


def check_entry(entry: store_pb2.LorebookEntry, where: str = "") -> None:
    """INVALID_ARGUMENT naming `<where>.<field>` (or `<field>`) for an entry the lorebook cannot hold."""

    def at(field: str) -> str:
        return f"{where}.{field}" if where else field

    if not OWNER.match(entry.owner):
        raise invalid_argument(at("owner"), f"is {entry.owner!r}; an owner is world, player or plugin:<pluginId>")
    if not entry.id or len(entry.id) > ID_MAX or entry.id != entry.id.strip():
        raise invalid_argument(at("id"), f"must be 1 to {ID_MAX} characters without surrounding spaces")
    if len(entry.title) > TITLE_MAX:
        raise invalid_argument(at("title"), f"is longer than {TITLE_MAX} characters")
    if not entry.content.strip() or len(entry.content) > CONTENT_MAX:
        raise invalid_argument(at("content"), f"must be 1 to {CONTENT_MAX} characters: what the story should know")
    if len(entry.keys) > KEYS_MAX or any(not key.strip() or len(key) > KEY_MAX for key in entry.keys):
        raise invalid_argument(at("keys"), f"at most {KEYS_MAX} keys of 1 to {KEY_MAX} characters")
    use_regex, case_sensitive = entry.activation.use_regex, entry.activation.case_sensitive
    for key in [*entry.keys, *entry.activation.secondary_keys, *entry.activation.exclude_keys]:
        try:
            regex_of(key, use_regex, case_sensitive)
        except BadKey as problem:
            raise invalid_argument(at("keys"), f"{problem}; keys run on RE2 (no backreferences or lookaround)") from None
    if not entry.keys and not entry.constant:
        raise invalid_argument(at("keys"), "give the words that bring it into a story, or make it constant")

"""Damaged cards: whatever bytes of a card PNG, a CHARX or a card's JSON are flipped or cut, an import either gives
a world that loads or is refused with IMPORT_REFUSED naming a field; nothing else escapes."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.registry.importing.card_export import card_charx
from services.registry.importing.importer import import_bytes
from shared.errors import ServiceError
from tests.importing import cards
from tests.importing.test_import_cards import world_state

SHAPES = {"png": cards.card_png(cards.v3_card()), "charx": cards.charx(cards.v3_card()), "json": json.dumps(cards.v2_card()).encode()}


def damaged(data: bytes, flips: list[tuple[int, int]], cut: int) -> bytes:
    body = bytearray(data)
    for position, value in flips:
        body[position % len(body)] = value
    return bytes(body[: max(1, len(body) - cut)])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from(sorted(SHAPES)), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
       cut=st.integers(0, 200))
def test_a_damaged_card_is_imported_or_refused_by_field(shape: str, flips: list[tuple[int, int]], cut: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        try:
            world = import_bytes(damaged(SHAPES[shape], flips, cut), Path(folder), "fuzzed")
        except ServiceError as error:
            assert error.code == grpc.StatusCode.INVALID_ARGUMENT and error.reason == "IMPORT_REFUSED", error
            assert error.violations and error.violations[0].field
        else:
            assert world.loaded


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats() | st.text(max_size=30),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                           max_leaves=12)
CARD_FIELDS = ["name", "description", "first_mes", "alternate_greetings", "group_only_greetings", "system_prompt", "extensions",
               "character_book", "assets", "nickname", "tags", "creator", "character_version"]
ENTRY_FIELDS = ["keys", "content", "secondary_keys", "selective", "constant", "enabled", "insertion_order", "id", "comment",
                "position", "use_regex", "case_sensitive", "extensions"]
EXTENSION_KEYS = ["position", "depth", "role", "selectiveLogic", "probability", "useProbability", "sticky", "group", "scan_depth",
                  "match_whole_words", "delay_until_recursion"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(card_field=st.sampled_from(CARD_FIELDS), card_value=JSON_VALUES, entry_field=st.sampled_from(ENTRY_FIELDS),
       entry_value=JSON_VALUES, extension=st.sampled_from(EXTENSION_KEYS), extension_value=JSON_VALUES)
def test_fields_of_any_json_type_are_imported_or_refused_by_field(card_field, card_value, entry_field, entry_value, extension,
                                                                  extension_value) -> None:
    card = cards.v3_card()
    entry = card["data"]["character_book"]["entries"][1]
    entry["extensions"][extension] = extension_value
    entry[entry_field] = entry_value
    card["data"][card_field] = card_value
    with tempfile.TemporaryDirectory() as folder:
        try:
            world = import_bytes(json.dumps(card).encode(), Path(folder), "fuzzed")
        except ServiceError as error:
            assert error.code == grpc.StatusCode.INVALID_ARGUMENT and error.reason == "IMPORT_REFUSED", error
        else:
            assert world.loaded
            again = import_bytes(card_charx(world), Path(folder) / "again", "fuzzed")  # and the round trip holds
            assert world_state(again) == world_state(world)

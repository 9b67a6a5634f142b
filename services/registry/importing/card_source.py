"""What an imported file holds, whatever its shape: a character card (V1 JSON, V2 `chara_card_v2`, V3
`chara_card_v3`; as JSON, in a PNG's `ccv3` or `chara` tEXt chunk, or as a CHARX zip) or a standalone lorebook
(`lorebook_v3`, or SillyTavern World Info JSON `{entries: {...}}`)."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from services.registry.importing.charx import CARD_FILE, is_zip, read_charx
from services.registry.importing.limits import FILE_MAX, JSON_DEPTH_MAX, JSON_MAX, refused
from services.registry.importing.png_text import is_png, read_png

CARD_V1, CARD_V2, CARD_V3 = "chara_card_v1", "chara_card_v2", "chara_card_v3"
LOREBOOK_V3, WORLD_INFO = "lorebook_v3", "sillytavern_world_info"


@dataclass
class ImportSource:
    kind: Literal["card", "lorebook"]
    spec: str
    # A card's `data` (a V1 card's fields as they are), or the lorebook object (`data` of lorebook_v3).
    data: dict[str, Any]
    # The PNG the card came in (its `ccdefault:` icon).
    image: bytes | None = None
    # A CHARX's members by path (its assets).
    files: dict[str, bytes] = field(default_factory=dict)


def read_source(data: bytes) -> ImportSource:
    if len(data) > FILE_MAX:
        raise refused("file", f"is {len(data)} bytes; an import reads at most {FILE_MAX}")
    if is_png(data):
        png = read_png(data)
        chunk, name = (png.texts["ccv3"], "ccv3") if "ccv3" in png.texts else (png.texts.get("chara"), "chara")
        if chunk is None:
            raise refused("file.tEXt", "holds no `ccv3` or `chara` chunk: this PNG is not a character card")
        return _card(_json(_base64(chunk, f"tEXt.{name}"), f"tEXt.{name}"), image=data)
    if is_zip(data):
        files = read_charx(data)
        source = _card(_json(files[CARD_FILE], CARD_FILE))
        source.files = files
        return source
    return _card(_json(data, "file"))


def _base64(text: bytes, where: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise refused(where, "is not valid base64 (a card's chunk is the base64 of its JSON)") from None


def _json(raw: bytes, where: str) -> Any:
    if len(raw) > JSON_MAX:
        raise refused(where, f"is {len(raw)} bytes of JSON; at most {JSON_MAX}")
    try:
        value = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise refused(where, f"is not JSON in UTF-8 ({str(error)[:200]})") from None
    _check_depth(value, where)
    return value


def _check_depth(value: Any, where: str) -> None:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > JSON_DEPTH_MAX:
            raise refused(where, f"nests deeper than {JSON_DEPTH_MAX} levels")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children)


def _card(value: Any, image: bytes | None = None) -> ImportSource:
    if not isinstance(value, dict):
        raise refused("spec", "the file holds no JSON object; a card or lorebook is one")
    spec = value.get("spec")
    if spec in (CARD_V2, CARD_V3, LOREBOOK_V3):
        data = value.get("data")
        if not isinstance(data, dict):
            raise refused("data", f"a `{spec}` holds its fields in the object `data`")
        return ImportSource("lorebook" if spec == LOREBOOK_V3 else "card", spec, data, image)
    if spec is not None:
        raise refused("spec", f"is {str(spec)[:60]!r}; known: {CARD_V2}, {CARD_V3}, {LOREBOOK_V3} (or a V1 card / World Info without one)")
    if isinstance(value.get("entries"), dict | list) and "first_mes" not in value:
        return ImportSource("lorebook", WORLD_INFO, value, image)
    if isinstance(value.get("name"), str) and "first_mes" in value:
        return ImportSource("card", CARD_V1, value, image)
    raise refused("spec", "is missing, and this is neither a V1 card (name, first_mes) nor World Info (entries)")

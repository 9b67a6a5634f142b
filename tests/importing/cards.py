"""Cards and lorebooks of every shape, built by the tests themselves: PNG files with tEXt chunks written here
(not by the code under test), CHARX zips, JSON."""

from __future__ import annotations

import base64
import io
import json
import struct
import zipfile
import zlib
from typing import Any

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chunk(kind: bytes, body: bytes, crc: int | None = None) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) if crc is None else crc)


def png(width: int = 2, height: int = 2, texts: dict[str, bytes] | None = None, extra: bytes = b"") -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x10\x20\x30" * min(width, 4) for _ in range(min(height, 4)))
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
    for keyword, text in (texts or {}).items():
        body += chunk(b"tEXt", keyword.encode("latin-1") + b"\0" + text)
    return PNG_SIGNATURE + body + extra + chunk(b"IEND", b"")


def b64json(value: Any) -> bytes:
    return base64.b64encode(json.dumps(value).encode("utf-8"))


def card_png(card: dict[str, Any], keyword: str = "ccv3", also_v2: dict[str, Any] | None = None) -> bytes:
    texts = {keyword: b64json(card)}
    if also_v2 is not None:
        texts = {"chara": b64json(also_v2), **texts}
    return png(texts=texts)


def charx(card: dict[str, Any], assets: dict[str, bytes] | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("card.json", json.dumps(card))
        for path, body in (assets or {}).items():
            archive.writestr(path, body)
    return out.getvalue()


def book_entry(entry_id: int, keys: list[str], content: str, **more: Any) -> dict[str, Any]:
    return {"id": entry_id, "keys": keys, "content": content, "extensions": {}, "enabled": True, "insertion_order": 100, **more}


def v2_card(**data: Any) -> dict[str, Any]:
    base = {"name": "Lin Yao", "description": "A lighthouse keeper's daughter.", "personality": "stubborn, kind",
            "scenario": "A storm coast where the lamps went dark.", "first_mes": "*She looks up.* You came back.",
            "mes_example": "<START>\n{{char}}: Hm.", "creator_notes": "Be gentle.", "system_prompt": "Write as {{char}}.",
            "post_history_instructions": "Stay in character.", "alternate_greetings": ["Another night.", "The lamp is out, {{user}}."],
            "tags": ["coast"], "creator": "someone", "character_version": "1.2",
            "extensions": {"talkativeness": "0.5", "depth_prompt": {"prompt": "x", "depth": 4}, "custom/thing": [1, 2]},
            "character_book": {"name": "Coast lore", "scan_depth": 3, "token_budget": 800, "recursive_scanning": True,
                               "extensions": {"risu_x": 1},
                               "entries": [
                                   book_entry(1, ["lighthouse", "lamp"], "The lens was stolen.", comment="Lighthouse"),
                                   book_entry(2, ["harbor"], "Boats are missing.", selective=True, secondary_keys=["night"],
                                              extensions={"position": 4, "depth": 2, "role": 1, "selectiveLogic": 2,
                                                          "probability": 40, "useProbability": True, "sticky": 2, "cooldown": 1,
                                                          "group": "weather", "display_index": 7, "vectorized": False}),
                                   book_entry(3, [], "@@depth 0\n@@role assistant\n@@exclude_keys calm,quiet\n@@is_greeting 1\nRain.",
                                              constant=True, enabled=False),
                                   book_entry(4, [], "no keys, not constant"),
                               ]}}
    base.update(data)
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": base}


def v3_card(**data: Any) -> dict[str, Any]:
    card = v2_card()
    card["spec"], card["spec_version"] = "chara_card_v3", "3.0"
    card["data"].update({"nickname": "Yao", "group_only_greetings": ["*To the room:* Quiet."], "source": ["https://example.org/c/1"],
                         "creation_date": 1700000000, "modification_date": 1700000100,
                         "creator_notes_multilingual": {"zh": "温柔一点。"},
                         "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"},
                                    {"type": "background", "uri": "https://example.org/bg.png", "name": "bg", "ext": "png"}]})
    card["data"].update(data)
    return card


def v1_card() -> dict[str, Any]:
    return {"name": "Old Tobin", "description": "An innkeeper.", "personality": "warm", "scenario": "An inn.",
            "first_mes": "Welcome, friend.", "mes_example": ""}


def world_info(count: int = 3) -> dict[str, Any]:
    entries = {str(uid): {"uid": uid, "key": [f"word{uid}", "/sto+rm/i"], "keysecondary": [], "comment": f"Entry {uid}",
                          "content": f"Fact {uid}.", "constant": False, "selective": False, "order": 100 + uid, "position": 1,
                          "disable": False, "excludeRecursion": uid == 1, "preventRecursion": False, "probability": 100,
                          "useProbability": True, "depth": 4, "group": "", "scanDepth": None, "caseSensitive": None,
                          "matchWholeWords": None, "sticky": 0, "cooldown": 0, "delay": uid, "displayIndex": uid, "addMemo": True}
               for uid in range(count)}
    return {"entries": entries}

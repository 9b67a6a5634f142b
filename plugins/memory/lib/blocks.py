"""Memory blocks: named, always-in-prompt pieces of memory (a label, a description, a character
limit, read-only or editable, and a value). Pure functions over plain values; server/index.py
registers them."""

from __future__ import annotations

import re
from typing import Any

LABEL = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
DEFAULT_LIMIT = 1000
MAX_LIMIT = 5000
NAMESPACE = "blocks"
EDIT_TOOL = "memory-block-edit"

# The memory plugin's own definitions (memory.block-definitions@1), by locale.
DEFAULTS = {
    "en": [
        {"label": "player", "limit": 600, "readOnly": False,
         "description": "Who the player's character is: name, looks, traits, what they want, what they carry that matters."},
        {"label": "scene", "limit": 600, "readOnly": False,
         "description": "Where the story stands now: the place, who is present, what is at stake."},
    ],
    "zh": [
        {"label": "player", "limit": 600, "readOnly": False,
         "description": "玩家的角色是谁：名字、外貌、性格、想要什么、身上带着的要紧东西。"},
        {"label": "scene", "limit": 600, "readOnly": False, "description": "故事此刻的局面：地点、在场的人、眼下的利害。"},
    ],
}

TEXTS = {
    "en": {"heading": "Memory blocks: what is true in this story now. Keep to them.", "empty": "(empty)",
           "read_only": "read-only", "edit": ("Keep the editable blocks up to date with the tool memory-block-edit: "
                                              "{\"label\", \"append\": text} adds a line; {\"label\", \"replace\": old text, "
                                              "\"with\": new text} rewrites part of a block. A block never grows past its limit.")},
    "zh": {"heading": "记忆块：这个故事此刻成立的事实。请遵守。", "empty": "（空）", "read_only": "只读",
           "edit": ("用工具 memory-block-edit 更新可编辑的记忆块：{\"label\", \"append\": 文字} 追加一行；"
                    "{\"label\", \"replace\": 原文, \"with\": 新文字} 改写其中一段。记忆块不能超过字数上限。")},
}


class BlockError(ValueError):
    """A refused edit, with a code and a hint the model can act on."""

    def __init__(self, code: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


def language(locale: Any) -> str:
    return "zh" if str(locale or "").lower().startswith("zh") else "en"


def default_definitions(locale: Any) -> list[dict[str, Any]]:
    return [dict(block) for block in DEFAULTS[language(locale)]]


def normalised(record: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A block with every field: a world's record over the default of the same label."""
    block = {"description": "", "limit": DEFAULT_LIMIT, "readOnly": False, "value": "", **(base or {}), **record}
    limit = block["limit"]
    block["limit"] = limit if isinstance(limit, int) and not isinstance(limit, bool) and 0 < limit <= MAX_LIMIT else DEFAULT_LIMIT
    block["readOnly"] = block["readOnly"] is True
    block["value"] = block["value"] if isinstance(block["value"], str) else ""
    return block


def session_blocks(records: dict[str, Any], locale: Any) -> list[dict[str, Any]]:
    """The session's blocks in order: the defaults (overridden by a record of the same label), then the
    other records by label. A record that is not a block is left out."""
    defaults = {block["label"]: block for block in default_definitions(locale)}
    blocks = [normalised(records[label], base) if isinstance(records.get(label), dict) else normalised(base)
              for label, base in defaults.items()]
    for label in sorted(records):
        record = records[label]
        if label not in defaults and isinstance(record, dict) and LABEL.match(label):
            blocks.append(normalised({**record, "label": label}))
    return blocks


def render(blocks: list[dict[str, Any]], locale: Any, editing: bool) -> str:
    """The blocks as the prompt shows them: one tag per block with its limit, description and value."""
    words = TEXTS[language(locale)]
    lines = [words["heading"]]
    for block in blocks:
        flags = f' {words["read_only"]}="true"' if block["readOnly"] else ""
        lines.append(f'<{block["label"]} chars="{len(block["value"])}/{block["limit"]}"{flags}>')
        if block["description"]:
            lines.append(f"({block['description']})")
        lines.append(block["value"] or words["empty"])
        lines.append(f'</{block["label"]}>')
    if editing:
        lines.append(words["edit"])
    return "\n".join(lines)


def edit(blocks: list[dict[str, Any]], args: Any) -> dict[str, Any]:
    """The block after memory-block-edit's {label, append} or {label, replace, with}; BlockError when refused."""
    if not isinstance(args, dict) or not isinstance(args.get("label"), str):
        raise BlockError("invalid-input", "give the block's label", 'e.g. {"label": "scene", "append": "..."}')
    block = next((b for b in blocks if b["label"] == args["label"]), None)
    if block is None:
        raise BlockError("unknown-block", f"there is no memory block {args['label']!r}",
                         f"use one of: {', '.join(b['label'] for b in blocks)}")
    if block["readOnly"]:
        raise BlockError("read-only", f"the memory block {block['label']!r} is read-only", "edit another block")
    if isinstance(args.get("append"), str) and "replace" not in args:
        text = args["append"].strip()
        if not text:
            raise BlockError("invalid-input", "append needs text")
        value = f"{block['value']}\n{text}" if block["value"] else text
    elif isinstance(args.get("replace"), str) and isinstance(args.get("with"), str):
        if not args["replace"] or args["replace"] not in block["value"]:
            raise BlockError("not-found", f"the memory block {block['label']!r} does not contain {args['replace']!r}",
                             "copy the text to replace exactly as the block shows it")
        value = block["value"].replace(args["replace"], args["with"].strip(), 1)
    else:
        raise BlockError("invalid-input", 'write {"label", "append": text} or {"label", "replace": old, "with": new}')
    if len(value) > block["limit"]:
        raise BlockError("over-limit", f"the memory block {block['label']!r} would hold {len(value)} characters; its limit is {block['limit']}",
                         "shorten the text, or replace older text in the block instead of adding")
    return {**block, "value": value}

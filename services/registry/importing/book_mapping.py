"""A card's character book (V2/V3 `character_book`, `lorebook_v3`) and SillyTavern World Info, to the world's
lorebook and back. World Info entries are first put in the card's shape, as SillyTavern does when it embeds a
world in a card. What the kernel reads goes to typed fields (`activation`, world_lorebook_models.py); what it
does not read stays in the entry's `imported`, verbatim; `covel export` puts both back.

ENTRY_FIELDS and EXTENSION_FIELDS say where each field goes; docs/worlds.md's "Import" table is made from them."""

from __future__ import annotations

import math
import re
from typing import Any

from services.registry.importing.limits import refused
from services.registry.world_models import ITEM_ID
from shared.lorebook import ENTRIES_MAX
from shared.lorebook_keys import BadKey, regex_of
from shared.lorebook_rules import ACTIVATION_DEFAULTS

# A card entry's own fields -> where the world keeps them.
ENTRY_FIELDS: dict[str, str] = {
    "keys": "`keys` (blank keys dropped)",
    "content": "`content`, less its leading `@@decorators`",
    "comment": "`title`",
    "enabled": "`disabled` (its negation)",
    "constant": "`constant`",
    "insertion_order": "`activation.order`",
    "case_sensitive": "`activation.caseSensitive`",
    "use_regex": "`activation.useRegex`",
    "selective": "whether `secondary_keys` apply",
    "secondary_keys": "`activation.secondaryKeys` (kept verbatim when `selective` is false)",
    "position": "`activation.position` (`before_char` / `after_char`)",
    "id": "the entry id `entry-<id>`",
    "extensions": "the keys below to `activation`; the rest verbatim in `imported.extensions`",
    "name": "kept verbatim (`imported.name`)",
    "priority": "kept verbatim (`imported.priority`)",
}
# SillyTavern's keys in an entry's `extensions` (World Info's camelCase names in brackets) -> `activation`.
EXTENSION_FIELDS: dict[str, tuple[str, str]] = {
    "position": ("position", "0 `beforeChar`, 1 `afterChar`, 4 `atDepth`; others kept verbatim"),
    "depth": ("depth", "`activation.depth`"),
    "role": ("role", "0 `system`, 1 `user`, 2 `assistant`"),
    "selectiveLogic": ("selectiveLogic", "0 `andAny`, 1 `notAll`, 2 `notAny`, 3 `andAll`"),
    "probability": ("probability", "`activation.probability` (100 when `useProbability` is false)"),
    "useProbability": ("useProbability", "with `probability`"),
    "exclude_recursion": ("excludeRecursion", "`activation.excludeRecursion`"),
    "prevent_recursion": ("preventRecursion", "`activation.preventRecursion`"),
    "delay_until_recursion": ("delayUntilRecursion", "`activation.delayUntilRecursion`"),
    "scan_depth": ("scanDepth", "`activation.scanDepth`"),
    "match_whole_words": ("matchWholeWords", "`activation.wholeWords`"),
    "case_sensitive": ("caseSensitive", "`activation.caseSensitive`"),
    "group": ("group", "`activation.group`"),
    "group_override": ("groupOverride", "`activation.groupOverride`"),
    "group_weight": ("groupWeight", "`activation.groupWeight`"),
    "sticky": ("sticky", "`activation.sticky` (turns)"),
    "cooldown": ("cooldown", "`activation.cooldown` (turns)"),
    "delay": ("delay", "`activation.delay` (turns)"),
}
# V3 decorators at the head of an entry's content -> `activation` (the others are kept verbatim).
DECORATORS: dict[str, str] = {
    "depth": "`activation.position: atDepth`, `activation.depth`",
    "role": "`activation.role`",
    "scan_depth": "`activation.scanDepth`",
    "activate_only_after": "`activation.delay`",
    "activate_only_every": "`activation.every`",
    "keep_activate_after_match": "`activation.sticky` for good",
    "dont_activate_after_match": "`activation.once`",
    "additional_keys": "more `keys`",
    "exclude_keys": "`activation.excludeKeys`",
    "activate": "`constant`",
    "dont_activate": "`disabled`",
}
BOOK_FIELDS: dict[str, str] = {
    "entries": "`lorebook` (entries with no usable key or content are kept verbatim in `imported.book.unused`)",
    "scan_depth": "`lorebookSettings.scanDepth`",
    "token_budget": "`lorebookSettings.tokenBudget`",
    "recursive_scanning": "`lorebookSettings.recursive`",
    "name": "kept verbatim (`imported.book`)",
    "description": "kept verbatim (`imported.book`)",
    "extensions": "kept verbatim (`imported.book`)",
}
STICKY_FOREVER = 10_000
_POSITIONS = {0: "beforeChar", 1: "afterChar", 4: "atDepth"}
_LOGIC = {0: "andAny", 1: "notAll", 2: "notAny", 3: "andAll"}
_ROLES = {0: "system", 1: "user", 2: "assistant"}
_DECORATOR = re.compile(r"^@@([a-z_]+)(?:\s+(.*))?$")


def world_info_entries(book: dict[str, Any]) -> list[Any]:
    """World Info's `entries` (an object by uid, or a list) in the card's entry shape."""
    raw = book.get("entries")
    items = list(raw.values()) if isinstance(raw, dict) else raw if isinstance(raw, list) else []
    return [_from_world_info(item) if isinstance(item, dict) else item for item in items]


def _from_world_info(entry: dict[str, Any]) -> dict[str, Any]:
    renamed = {"key": "keys", "keysecondary": "secondary_keys", "order": "insertion_order", "uid": "id"}
    card = {renamed.get(name, name): value for name, value in entry.items()
            if name in renamed or name in ("content", "comment", "constant", "selective")}
    card["enabled"] = not entry.get("disable", False)
    extensions = dict(entry.get("extensions") or {})
    for card_name, (info_name, _) in EXTENSION_FIELDS.items():
        if info_name in entry:
            extensions[card_name] = entry[info_name]
    kept = {name: value for name, value in entry.items()
            if name not in renamed and name not in card and name not in {info for info, _ in EXTENSION_FIELDS.values()}
            and name not in ("disable", "extensions")}
    extensions.update(kept)
    card["extensions"] = extensions
    return card


def book_to_world(book: dict[str, Any], entries: list[Any], where: str) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """(lorebook entries, lorebookSettings, imported.book) of a card book; refuses past ENTRIES_MAX."""
    listed = f"{where}.entries" if where else "entries"
    if len(entries) > ENTRIES_MAX:
        raise refused(listed, f"holds {len(entries)} entries; a world's lorebook holds at most {ENTRIES_MAX}")
    lorebook, unused, ids = [], [], set()
    for index, entry in enumerate(entries):
        at = f"{listed}[{index}]"
        if not isinstance(entry, dict):
            raise refused(at, "is not an object")
        mapped = entry_to_world(entry, index, at)
        if mapped is None:
            unused.append(entry)
            continue
        if mapped["id"] in ids:
            mapped["imported"] = {**mapped.get("imported", {}), "id": entry.get("id")}
            mapped["id"] = f"entry-i{index}"
        ids.add(mapped["id"])
        lorebook.append(mapped)
    settings = {name: book[card] for card, name in (("scan_depth", "scanDepth"), ("token_budget", "tokenBudget"),
                                                    ("recursive_scanning", "recursive")) if book.get(card) is not None}
    kept = {name: book[name] for name in ("name", "description", "extensions") if book.get(name) not in (None, "", {})}
    if unused:
        kept["unused"] = unused
    return lorebook, settings, kept


def entry_to_world(entry: dict[str, Any], index: int, at: str) -> dict[str, Any] | None:
    """One card entry as a world lorebook entry, or None when it has no usable content or key (kept verbatim)."""
    decorators, content = split_decorators(_text(entry.get("content", ""), f"{at}.content"))
    activation: dict[str, Any] = {}
    imported: dict[str, Any] = {}
    out: dict[str, Any] = {"id": _entry_id(entry.get("id"), index)}
    keys = [key for key in _strings(entry.get("keys"), f"{at}.keys") if key.strip()]
    flags = {"constant": bool(entry.get("constant")), "disabled": entry.get("enabled") is False}
    _native(entry, activation, imported, at)
    _extensions(entry.get("extensions"), activation, imported, at)
    kept_decorators = _decorators(decorators, keys, activation, flags, at)
    if kept_decorators:
        imported["decorators"] = kept_decorators
    if not content.strip() or not (keys or flags["constant"]):
        return None
    _check_regex(keys, activation, at)
    title = entry.get("comment") or ""
    out.update({"title": _text(title, f"{at}.comment")[:200]} if title else {})
    out.update({"keys": keys} if keys else {})
    out["content"] = content
    out.update({name: True for name, value in flags.items() if value})
    out.update({"activation": activation} if activation else {})
    out.update({"imported": imported} if imported else {})
    return out


def _check_regex(keys: list[str], activation: dict[str, Any], at: str) -> None:
    """A key RE2 cannot run (a backreference, lookaround) is refused naming the card's field."""
    for field, written in (("keys", keys), ("secondary_keys", activation.get("secondaryKeys") or [])):
        for index, key in enumerate(written):
            try:
                regex_of(key, bool(activation.get("useRegex")), bool(activation.get("caseSensitive")))
            except BadKey as problem:
                raise refused(f"{at}.{field}[{index}]", f"{problem}: the kernel runs regex keys on RE2; rewrite it without "
                                                        "backreferences or lookaround") from None


def _entry_id(value: Any, index: int) -> str:
    candidate = f"entry-{value}" if isinstance(value, int | str) and not isinstance(value, bool) and str(value) != "" else ""
    return candidate if ITEM_ID.match(candidate) else f"entry-i{index}"


def _native(entry: dict[str, Any], activation: dict[str, Any], imported: dict[str, Any], at: str) -> None:
    if isinstance(entry.get("insertion_order"), int | float) and not isinstance(entry.get("insertion_order"), bool):
        activation["order"] = int(entry["insertion_order"])
    for card, name in (("case_sensitive", "caseSensitive"), ("use_regex", "useRegex")):
        if entry.get(card):
            activation[name] = True
    secondary = [key for key in _strings(entry.get("secondary_keys"), f"{at}.secondary_keys") if key.strip()]
    if secondary and entry.get("selective"):
        activation["secondaryKeys"] = secondary
    elif entry.get("secondary_keys"):
        imported["secondary_keys"] = entry["secondary_keys"]
    if entry.get("position") == "after_char":
        activation["position"] = "afterChar"
    for name in ("name", "priority"):
        if entry.get(name) not in (None, ""):
            imported[name] = entry[name]


def _extensions(extensions: Any, activation: dict[str, Any], imported: dict[str, Any], at: str) -> None:
    if extensions is None:
        return
    if not isinstance(extensions, dict):
        raise refused(f"{at}.extensions", "is not an object")
    kept = {name: value for name, value in extensions.items() if name not in EXTENSION_FIELDS}
    _coded(extensions, activation, kept)
    for card, name in _ACTIVATION_NAME.items():
        value = extensions.get(card)
        if value is None:
            continue
        if name in _BOOLEANS:
            activation[name] = bool(value)
        elif name == "group":
            if str(value).strip():
                activation["group"] = str(value)[:100]
        elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            activation[name] = max(0, int(value))
        else:
            kept[card] = value
    for name, default in _DEFAULTS.items():
        if name in activation and activation[name] == default:
            del activation[name]
    if kept:
        imported["extensions"] = kept


def _coded(ext: dict[str, Any], activation: dict[str, Any], kept: dict[str, Any]) -> None:
    """SillyTavern's numbered fields: position, role, selectiveLogic; probability with useProbability. A value that is
    not one of their numbers is kept verbatim."""
    for card_name, codes, name in (("position", _POSITIONS, "position"), ("role", _ROLES, "role"), ("selectiveLogic", _LOGIC, "selectiveLogic")):
        value = ext.get(card_name)
        if isinstance(value, int) and not isinstance(value, bool) and value in codes:
            activation[name] = codes[value]
        elif value is not None:
            kept[card_name] = value
    probability = ext.get("probability")
    if not (isinstance(probability, int | float) and not isinstance(probability, bool) and math.isfinite(probability)):
        if probability is not None:
            kept["probability"] = probability
    elif ext.get("useProbability") is not False:
        activation["probability"] = max(0, min(100, int(probability)))


_ACTIVATION_NAME = {"depth": "depth", "exclude_recursion": "excludeRecursion", "prevent_recursion": "preventRecursion",
                    "delay_until_recursion": "delayUntilRecursion", "scan_depth": "scanDepth", "match_whole_words": "wholeWords",
                    "case_sensitive": "caseSensitive", "group": "group", "group_override": "groupOverride",
                    "group_weight": "groupWeight", "sticky": "sticky", "cooldown": "cooldown", "delay": "delay"}
_BOOLEANS = {"excludeRecursion", "preventRecursion", "delayUntilRecursion", "wholeWords", "caseSensitive", "groupOverride"}
_DEFAULTS = ACTIVATION_DEFAULTS


def split_decorators(content: str) -> tuple[list[str], str]:
    """The `@@` lines at the head of an entry's content, and the content after them."""
    lines = content.split("\n")
    head = 0
    while head < len(lines) and lines[head].startswith("@@"):
        head += 1
    return lines[:head], "\n".join(lines[head:])


def _decorators(lines: list[str], keys: list[str], activation: dict[str, Any], flags: dict[str, bool], at: str) -> list[str]:
    kept = []
    for line in lines:
        found = _DECORATOR.match(line.strip())
        name, argument = (found.group(1), (found.group(2) or "").strip()) if found else ("", "")
        number = int(argument) if argument.isdigit() else None
        if name == "depth" and number is not None:
            activation.update(position="atDepth", depth=number)
        elif name == "role" and argument in ("system", "user", "assistant"):
            activation["role"] = argument
        elif name in ("scan_depth", "activate_only_after", "activate_only_every") and number is not None:
            activation[{"scan_depth": "scanDepth", "activate_only_after": "delay", "activate_only_every": "every"}[name]] = number
        elif name == "keep_activate_after_match":
            activation["sticky"] = STICKY_FOREVER
        elif name == "dont_activate_after_match":
            activation["once"] = True
        elif name in ("additional_keys", "exclude_keys") and argument:
            words = [word.strip() for word in argument.split(",") if word.strip()]
            if name == "additional_keys":
                keys.extend(words)
            else:
                activation["excludeKeys"] = words
        elif name in ("activate", "dont_activate"):
            flags["constant" if name == "activate" else "disabled"] = True
        else:
            kept.append(line)
    return kept


def _strings(value: Any, at: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise refused(at, "is not a list of strings")
    return value


def _text(value: Any, at: str) -> str:
    if not isinstance(value, str):
        raise refused(at, f"is a {type(value).__name__}; a text is expected")
    return value

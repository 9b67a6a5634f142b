"""`covel export`: a world as a Character Card V3, in a PNG (`ccv3` and, for older readers, a V2 `chara`
chunk) or a CHARX zip. The inverse of card_mapping.py and book_mapping.py: mapped fields go back to the card's
fields, what was kept verbatim (`imported`) goes back as it was, so import -> export -> import gives the same
world."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from services.registry.importing.card_mapping import DERIVED_ENTRIES, POST_HISTORY_ID, SYSTEM_PROMPT_ID
from services.registry.importing.card_source import CARD_V2, CARD_V3, LOREBOOK_V3
from services.registry.importing.charx import write_charx
from services.registry.importing.limits import refused
from services.registry.importing.media import DEFAULT_URI
from services.registry.importing.png_text import blank_png, with_texts
from services.registry.loaded_world import LoadedWorld
from services.registry.world_loader import load_world
from shared.lorebook_rules import ACTIVATION_DEFAULTS

_MIME = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "webp": "image/webp", "gif": "image/gif"}
_POSITION = {"beforeChar": 0, "afterChar": 1, "atDepth": 4}
_LOGIC = {"andAny": 0, "notAll": 1, "notAny": 2, "andAll": 3}
_ROLES = {"system": 0, "user": 1, "assistant": 2}
_ST_NAMES = {"depth": "depth", "excludeRecursion": "exclude_recursion", "preventRecursion": "prevent_recursion",
             "delayUntilRecursion": "delay_until_recursion", "scanDepth": "scan_depth", "wholeWords": "match_whole_words",
             "caseSensitive": "case_sensitive", "groupOverride": "group_override", "groupWeight": "group_weight",
             "sticky": "sticky", "cooldown": "cooldown", "delay": "delay"}


def loaded_world(folder: Path) -> LoadedWorld:
    world = load_world(folder)
    problems = [item for item in world.diagnostics if item.is_error]
    if world.manifest is None or problems:
        first = problems[0] if problems else None
        raise refused("world", f"{folder} does not load" + (f": {first.code} {first.message}" if first else ""))
    return world


def world_to_card(world: LoadedWorld) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(the V3 card, its assets' bytes by world media path)."""
    manifest = world.manifest
    assert manifest is not None
    kept = dict((manifest.imported or {}).get("card") or {})
    character = world.characters[0] if world.characters else {"name": manifest.name}
    data: dict[str, Any] = {"name": manifest.name, "description": character.get("description", ""),
                            "personality": character.get("personality", ""), "scenario": manifest.description or "",
                            "first_mes": manifest.opening or "", "mes_example": kept.pop("mes_example", ""),
                            "creator_notes": kept.pop("creator_notes", ""), "system_prompt": "", "post_history_instructions": "",
                            "alternate_greetings": [o.text for o in manifest.openings or [] if not o.groupOnly],
                            "group_only_greetings": [o.text for o in manifest.openings or [] if o.groupOnly],
                            "tags": kept.pop("tags", []), "creator": _author(manifest.author),
                            "character_version": manifest.version or "", "extensions": kept.pop("extensions", {})}
    if character.get("aliases"):
        data["nickname"] = character["aliases"][0]
    entries: list[dict[str, Any]] = []
    for entry in world.lorebook:
        if entry["id"] in DERIVED_ENTRIES:
            continue
        if entry["id"] in (SYSTEM_PROMPT_ID, POST_HISTORY_ID):
            data["system_prompt" if entry["id"] == SYSTEM_PROMPT_ID else "post_history_instructions"] = entry["content"]
        else:
            entries.append(entry_to_card(entry, len(entries)))
    book_kept = dict(kept.pop("book", {}) or (manifest.imported or {}).get("book") or {})
    if entries or book_kept:
        data["character_book"] = _book(world, entries, book_kept)
    assets, files = _assets(world, kept.pop("assets", []))
    data["assets"] = assets
    data.update(kept)
    return {"spec": CARD_V3, "spec_version": "3.0", "data": data}, files


def _author(author: Any) -> str:
    return author if isinstance(author, str) else getattr(author, "name", "") or ""


def _book(world: LoadedWorld, entries: list[dict[str, Any]], kept: dict[str, Any]) -> dict[str, Any]:
    settings = world.manifest.lorebookSettings if world.manifest else None
    result: dict[str, Any] = {"entries": entries + list(kept.pop("unused", [])), "extensions": kept.pop("extensions", {})}
    if settings is not None:
        result.update(scan_depth=settings.scanDepth, token_budget=settings.tokenBudget, recursive_scanning=settings.recursive)
    result.update(kept)
    return result


def entry_to_card(entry: dict[str, Any], index: int) -> dict[str, Any]:
    activation = dict(entry.get("activation") or {})
    imported = dict(entry.get("imported") or {})
    extensions = dict(imported.pop("extensions", {}))
    # SillyTavern's keys from the rules; a kept one is a value the kernel had no place for: it goes back as it came
    written = {"position": _POSITION[activation.get("position", "beforeChar")], "role": _ROLES[activation.get("role", "system")],
               "selectiveLogic": _LOGIC[activation.get("selectiveLogic", "andAny")], "probability": activation.get("probability", 100),
               "useProbability": True, "group": activation.get("group", ""),
               **{st: activation.get(name, ACTIVATION_DEFAULTS[name]) for name, st in _ST_NAMES.items()}}
    for name, value in written.items():
        extensions.setdefault(name, value)
    decorators = list(imported.pop("decorators", []))
    if activation.get("every"):
        decorators.append(f"@@activate_only_every {activation['every']}")
    if activation.get("once"):
        decorators.append("@@dont_activate_after_match")
    if activation.get("excludeKeys"):
        decorators.append("@@exclude_keys " + ",".join(activation["excludeKeys"]))
    original_id = imported.pop("id", None)
    suffix = entry["id"].removeprefix("entry-")
    card: dict[str, Any] = {
        "id": original_id if original_id is not None else int(suffix) if suffix.isdigit() else suffix if entry["id"].startswith("entry-") else index,
        "keys": entry.get("keys", []), "content": "\n".join([*decorators, entry["content"]]), "extensions": extensions,
        "enabled": not entry.get("disabled", False), "insertion_order": activation.get("order", 100),
        "case_sensitive": activation.get("caseSensitive", False), "use_regex": activation.get("useRegex", False),
        "constant": bool(entry.get("constant")), "comment": entry.get("title", ""),
        "selective": bool(activation.get("secondaryKeys")),
        "secondary_keys": activation.get("secondaryKeys") or imported.pop("secondary_keys", []),
        "position": "after_char" if activation.get("position") == "afterChar" else "before_char",
    }
    card.update(imported)
    return card


def _assets(world: LoadedWorld, kept: list[Any]) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    assets, files = [], {}
    manifest = world.manifest
    for media in (manifest.media if manifest else None) or []:
        ext = Path(media.path).suffix.lstrip(".")
        files[media.path] = (world.root_dir / media.path).read_bytes()
        assets.append({"type": media.type, "uri": media.path, "name": media.name, "ext": ext or "bin"})
    return assets + list(kept), files


def card_png(world: LoadedWorld) -> bytes:
    """The card in its icon (the first `icon` media that is a PNG; a blank image without one)."""
    card, files = world_to_card(world)
    icon = next((asset for asset in card["data"]["assets"] if asset.get("type") == "icon" and asset.get("ext") == "png"
                 and asset.get("uri") in files), None)
    image = files[icon["uri"]] if icon is not None else blank_png()
    for asset in card["data"]["assets"]:
        if icon is not None and asset is icon:
            asset["uri"] = DEFAULT_URI
        elif asset.get("uri") in files:  # a PNG carries no other file: the asset goes as a data: URI
            asset["uri"] = f"data:{_MIME.get(asset['ext'], 'application/octet-stream')};base64," \
                           + base64.b64encode(files[asset["uri"]]).decode("ascii")
    v3 = base64.b64encode(json.dumps(card, ensure_ascii=False).encode("utf-8"))
    v2 = base64.b64encode(json.dumps({**card, "spec": CARD_V2, "spec_version": "2.0"}, ensure_ascii=False).encode("utf-8"))
    return with_texts(image, {"chara": v2, "ccv3": v3})


def lorebook_json(world: LoadedWorld) -> bytes:
    """The world's lorebook alone, as a standalone `lorebook_v3` (what an imported lorebook goes back to)."""
    manifest = world.manifest
    assert manifest is not None
    kept = dict((manifest.imported or {}).get("book") or {})
    kept.setdefault("name", manifest.name)
    entries = [entry_to_card(entry, index) for index, entry in enumerate(world.lorebook)]
    return json.dumps({"spec": LOREBOOK_V3, "data": _book(world, entries, kept)}, ensure_ascii=False, indent=1).encode("utf-8")


def card_charx(world: LoadedWorld) -> bytes:
    card, files = world_to_card(world)
    members = {}
    for asset in card["data"]["assets"]:
        if asset.get("uri") in files:
            member = f"assets/{asset['type']}/{'images' if asset['ext'] in ('png', 'jpg', 'jpeg', 'webp', 'gif', 'avif') else 'other'}/" \
                     f"{asset['name']}.{asset['ext']}"
            members[member] = files[asset["uri"]]
            asset["uri"] = "embeded://" + member
    return write_charx(json.dumps(card, ensure_ascii=False, indent=1).encode("utf-8"), members)

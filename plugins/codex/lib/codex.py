"""codex's pure part: names, matching an answer to the entries already known, and merging it (no I/O here).

The codex keeps one dataset per category (`places`, `people`, `items`, `rumours`). An entry is never
duplicated: an answered entry is the known one whose name or an alias has the same normalised form (case,
width, spaces, a leading article and punctuation do not count), in any category; a person is first resolved
to the world model's character (by id, name or alias), whose name it then carries.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shared.plugin_sdk.characters import resolve_character

CATEGORIES = {"place": "places", "person": "people", "item": "items", "rumour": "rumours"}
MAX_ENTRIES_PER_TURN = 8
MAX_DESCRIPTION = 600
MAX_ALIASES = 12
_ARTICLE = re.compile(r"^(the|a|an)\s+", re.IGNORECASE)


class AnswerError(ValueError):
    """The model's answer does not fit codex.entries@1 (nothing of the turn is written)."""


def norm(name: str) -> str:
    """The form names are compared in: NFKC, case-folded, punctuation dropped, spaces collapsed, no leading article."""
    text = unicodedata.normalize("NFKC", str(name)).casefold()
    text = re.sub(r"[^\w\s]", " ", text)
    text = " ".join(text.split())
    return _ARTICLE.sub("", text)


def slug(name: str) -> str:
    text = norm(name)
    key = re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:64]
    if key and text.isascii():
        return key
    return "e-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


def _clean(text: Any, limit: int) -> str:
    return " ".join(str(text).split())[:limit]


def check_answer(answer: Any) -> list[dict[str, Any]]:
    """The answer's entries, or AnswerError naming what is wrong."""
    if not isinstance(answer, dict) or not isinstance(answer.get("entries"), list):
        raise AnswerError("the model's answer is not {\"entries\": [...]}")
    entries = answer["entries"]
    if len(entries) > MAX_ENTRIES_PER_TURN:
        raise AnswerError(f"the model gave {len(entries)} entries; at most {MAX_ENTRIES_PER_TURN} a turn")
    for index, entry in enumerate(entries):
        where = f"entries[{index}]"
        if not isinstance(entry, dict):
            raise AnswerError(f"{where} is not an object")
        for field, limit in (("name", 80), ("description", 300)):
            value = entry.get(field)
            if not isinstance(value, str) or not value.strip() or len(value) > limit:
                raise AnswerError(f"{where}.{field} must be a non-empty string of at most {limit} characters")
        if not norm(entry["name"]):
            raise AnswerError(f"{where}.name has no letters")
        if entry.get("category") not in CATEGORIES:
            raise AnswerError(f"{where}.category must be one of {', '.join(CATEGORIES)}, not {entry.get('category')!r}")
        aliases = entry.get("aliases", [])
        if not isinstance(aliases, list) or len(aliases) > 6 or not all(isinstance(a, str) and a.strip() and len(a) <= 80 for a in aliases):
            raise AnswerError(f"{where}.aliases must be a list of at most 6 names")
        extra = set(entry) - {"name", "category", "aliases", "description"}
        if extra:
            raise AnswerError(f"{where} has unknown fields: {', '.join(sorted(extra))}")
    return entries


def enriched(old: str, new: str) -> str:
    """The description after a later mention: the same, the new one when it says everything the old one did and
    more, or both, up to MAX_DESCRIPTION characters (a detail that does not fit is left out)."""
    old, new = _clean(old, MAX_DESCRIPTION), _clean(new, MAX_DESCRIPTION)
    if not new or norm(new) in norm(old):
        return old
    if norm(old) in norm(new):
        return new
    joined = f"{old.rstrip()} {new}" if old.rstrip().endswith((".", "!", "?", "。", "！", "？")) else f"{old.rstrip()}. {new}"
    return joined if len(joined) <= MAX_DESCRIPTION else old


def merge_aliases(name: str, aliases: Iterable[str], more: Iterable[str]) -> list[str]:
    """aliases + more, without the name and without two of the same normalised form."""
    seen = {norm(name)}
    result = []
    for alias in [*aliases, *more]:
        alias = _clean(alias, 80)
        if alias and norm(alias) and norm(alias) not in seen:
            seen.add(norm(alias))
            result.append(alias)
    return result[:MAX_ALIASES]


def plan(answer_entries: Sequence[Mapping[str, Any]], known: Mapping[str, Mapping[str, Mapping[str, Any]]],
         characters: Sequence[Mapping[str, Any]], turn: int, *, player_ids: Iterable[str] = ()
         ) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, list[str]]]:
    """The entries after this turn's answer: ({dataset: {key: record}} of the records that change, report).

    known: {dataset: {key: record}} as stored; player_ids: the characters the player plays (never an entry).
    report: {"added": [...], "enriched": [...], "seen": [...]} by name.
    """
    players = set(player_ids)
    state = {dataset: {key: dict(record) for key, record in (known.get(dataset) or {}).items()} for dataset in CATEGORIES.values()}
    index: dict[str, tuple[str, str]] = {}

    def remember(dataset: str, key: str, record: Mapping[str, Any]) -> None:
        for name in [record["name"], *(record.get("aliases") or [])]:
            index.setdefault(norm(name), (dataset, key))

    for dataset, records in state.items():
        for key, record in records.items():
            remember(dataset, key, record)
    changed: dict[str, dict[str, dict[str, Any]]] = {}
    report: dict[str, list[str]] = {"added": [], "enriched": [], "seen": []}
    for entry in answer_entries:
        name, category = _clean(entry["name"], 80), str(entry["category"])
        aliases = [_clean(a, 80) for a in entry.get("aliases") or []]
        description = _clean(entry["description"], 300)
        character = None
        found = resolve_character(characters, name) if characters else {"status": "missing"}
        if found["status"] != "found":
            found = next((hit for hit in (resolve_character(characters, a) for a in aliases) if hit["status"] == "found"), found) if characters else found
        if found["status"] == "found" and (category == "person" or norm(name) in {norm(found["character"].get("name", "")), *(
                norm(a) for a in found["character"].get("aliases") or [])}):
            character = found["character"]
            if str(character.get("id")) in players:
                continue
            canonical = _clean(character.get("name") or name, 80)
            aliases = [name, *aliases] if norm(name) != norm(canonical) else aliases
            name, category = canonical, "person"
        hit = next((index[norm(n)] for n in [name, *aliases] if norm(n) in index), None)
        if hit is not None:
            dataset, key = hit
            record = state[dataset][key]
            before = dict(record)
            record["aliases"] = merge_aliases(record["name"], record.get("aliases") or [], [name, *aliases])
            record["description"] = enriched(record["description"], description)
            if record["lastSeen"] != turn:
                record["mentions"] = int(record.get("mentions", 1)) + 1
            record["lastSeen"] = max(int(record["lastSeen"]), turn)
            if character is not None and "characterId" not in record:
                record["characterId"] = str(character["id"])
            if record["description"] != before["description"] and record["name"] not in report["enriched"]:
                report["enriched"].append(record["name"])
            elif record["name"] not in report["seen"] + report["enriched"] + report["added"]:
                report["seen"].append(record["name"])
        else:
            dataset = CATEGORIES[category]
            key, number = slug(name), 2
            while any(key in records for records in state.values()):
                key, number = f"{slug(name)}-{number}", number + 1
            record = {"id": key, "name": name, "category": category, "aliases": merge_aliases(name, [], aliases),
                      "description": description, "firstSeen": turn, "lastSeen": turn, "mentions": 1}
            if character is not None:
                record["characterId"] = str(character["id"])
            state[dataset][key] = record
            report["added"].append(name)
        remember(dataset, key, record)
        changed.setdefault(dataset, {})[key] = record
    # Only what differs from the stored records is written.
    changed = {dataset: {key: record for key, record in records.items() if (known.get(dataset) or {}).get(key) != record}
               for dataset, records in changed.items()}
    return {dataset: records for dataset, records in changed.items() if records}, report


def known_for_prompt(known: Mapping[str, Mapping[str, Mapping[str, Any]]], limit: int = 80) -> list[dict[str, Any]]:
    """The known entries the model is shown (the latest seen first), so it reuses their names."""
    records = [record for records in known.values() for record in records.values()]
    records.sort(key=lambda r: (-int(r.get("lastSeen", 0)), r.get("name", "")))
    return [{"name": r["name"], "category": r["category"], **({"aliases": r["aliases"]} if r.get("aliases") else {}),
             "description": r["description"]} for r in records[:limit]]


def story_text(segments: Any) -> str:
    lines = []
    for segment in segments if isinstance(segments, list) else []:
        if not isinstance(segment, Mapping) or not str(segment.get("text") or "").strip():
            continue
        speaker = str(segment.get("speaker") or "").strip()
        text = str(segment["text"]).strip()
        lines.append(f"{speaker}: \u201c{text}\u201d" if segment.get("kind") == "dialogue" and speaker else text)
    return "\n".join(lines)

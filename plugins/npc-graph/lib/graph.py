"""npc-graph's pure part: names, fact versions, the panel's per-character lists and the retrieval (no I/O here).

A fact is (subject, relation, object): `relation` is the aspect of the relationship (kin, trust, feeling,
bond, duty, secret) and a version holds its state ("distrusts", "is the daughter of"). The `facts` dataset
keeps every version; exactly one version of a fact is open (validTo null) while the relationship holds.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shared.plugin_sdk.characters import character_name_key, resolve_character

RELATIONS = ("kin", "trust", "feeling", "bond", "duty", "secret")
_KEY = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MAX_FACTS_PER_TURN = 8


class AnswerError(ValueError):
    """The model's answer does not fit npc-graph.facts@1 (nothing of the turn is written)."""


def slug(name: str) -> str:
    """An id for a name: ASCII words joined by '-'; a name in another script gets a stable short hash."""
    text = unicodedata.normalize("NFKC", name).strip()
    key = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:64]
    if key and text.isascii():
        return key
    return "c-" + hashlib.sha1(character_name_key(text).encode("utf-8")).hexdigest()[:10]


def character_ref(name: str, characters: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """(id, display name) of a character the model named: the world model's character (by id, name or alias),
    else a slug of the name for someone the world does not know; None when the name is ambiguous."""
    found = resolve_character(characters, name)
    if found["status"] == "found":
        character = found["character"]
        key = str(character["id"]).lower()
        return (key if _KEY.match(key) else slug(key)), str(character.get("name") or name).strip()[:80]
    if found["status"] == "ambiguous":
        return None
    return slug(name), " ".join(name.split())[:80]


def fact_id(subject_id: str, relation: str, object_id: str) -> str:
    return f"{subject_id}.{relation}.{object_id}"


def version_key(fact: str, turn: int) -> str:
    return f"{fact}@{turn}"


def same_state(a: str, b: str) -> bool:
    return character_name_key(a).rstrip(".。") == character_name_key(b).rstrip(".。")


def sentence(subject: str, state: str, obj: str) -> str:
    """"Mira distrusts Old Tobin"; without spaces for a state in a script written without them ("米拉不信任老托宾")."""
    if state.isascii():
        return f"{subject} {state} {obj}"
    return f"{subject}{state}{obj}"


def check_answer(answer: Any) -> list[dict[str, Any]]:
    """The answer's facts, or AnswerError naming what is wrong (the output schema is also the response format,
    but a provider may not enforce it)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("facts"), list):
        raise AnswerError("the model's answer is not {\"facts\": [...]}")
    facts = answer["facts"]
    if len(facts) > MAX_FACTS_PER_TURN:
        raise AnswerError(f"the model gave {len(facts)} facts; at most {MAX_FACTS_PER_TURN} a turn")
    for index, fact in enumerate(facts):
        where = f"facts[{index}]"
        if not isinstance(fact, dict):
            raise AnswerError(f"{where} is not an object")
        for field, limit in (("subject", 80), ("object", 80), ("state", 60), ("evidence", 200)):
            value = fact.get(field)
            if not isinstance(value, str) or not value.strip() or len(value) > limit:
                raise AnswerError(f"{where}.{field} must be a non-empty string of at most {limit} characters")
        if fact.get("relation") not in RELATIONS:
            raise AnswerError(f"{where}.relation must be one of {', '.join(RELATIONS)}, not {fact.get('relation')!r}")
        if "ended" in fact and not isinstance(fact["ended"], bool):
            raise AnswerError(f"{where}.ended must be true or false")
        extra = set(fact) - {"subject", "relation", "object", "state", "evidence", "ended"}
        if extra:
            raise AnswerError(f"{where} has unknown fields: {', '.join(sorted(extra))}")
    return facts


def open_versions(records: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """fact id -> its open version."""
    return {record["fact"]: dict(record) for record in records.values()
            if isinstance(record, Mapping) and record.get("validTo") is None and record.get("fact")}


def plan_changes(facts: Iterable[Mapping[str, Any]], records: Mapping[str, Mapping[str, Any]],
                 characters: Sequence[Mapping[str, Any]], turn: int) -> tuple[list[tuple[str, str, Any]], list[dict[str, Any]]]:
    """What this turn's facts do to the versions: (writes, changed).

    writes: ("close", key, turn) to close an open version, ("set", key, record) to open a new one.
    A fact whose state is the open one's changes nothing; `ended` closes the open version and opens none;
    a changed state closes it and opens the new one (validFrom = validTo = the turn). A fact about a name
    that is ambiguous in the world model, or about a character and themself, is left out; of two facts on
    the same (subject, relation, object) in one answer the first counts.
    """
    current = open_versions(records)
    writes: list[tuple[str, str, Any]] = []
    changed: list[dict[str, Any]] = []
    seen: set[str] = set()
    for fact in facts:
        subject = character_ref(str(fact["subject"]), characters)
        obj = character_ref(str(fact["object"]), characters)
        if subject is None or obj is None or subject[0] == obj[0]:
            continue
        relation = str(fact["relation"])
        key = fact_id(subject[0], relation, obj[0])
        if key in seen:
            continue
        seen.add(key)
        state = " ".join(str(fact["state"]).split())[:60]
        was = current.get(key)
        ended = bool(fact.get("ended"))
        if was is not None and not ended and same_state(was["state"], state):
            continue
        if was is None and ended:
            continue
        if was is not None:
            writes.append(("close", was["id"], turn))
        if not ended:
            # A version of this fact already opened in this logical turn (a turn that did not advance it) keeps its record.
            at, number = version_key(key, turn), 2
            while at in records:
                at, number = f"{version_key(key, turn)}.{number}", number + 1
            record = {"id": at, "fact": key, "subject": subject[1], "subjectId": subject[0],
                      "relation": relation, "object": obj[1], "objectId": obj[0], "state": state,
                      "evidence": " ".join(str(fact["evidence"]).split())[:200], "validFrom": turn, "validTo": None}
            writes.append(("set", record["id"], record))
        changed.append({"fact": key, "subject": subject[1], "relation": relation, "object": obj[1],
                        "state": None if ended else state, "was": was["state"] if was is not None else None})
    return writes, changed


def applied(records: Mapping[str, Mapping[str, Any]], writes: Iterable[tuple[str, str, Any]]) -> dict[str, dict[str, Any]]:
    """The records after the writes (what the dataset will hold)."""
    result = {key: dict(value) for key, value in records.items()}
    for kind, key, value in writes:
        if kind == "close":
            result[key] = {**result[key], "validTo": value}
        else:
            result[key] = dict(value)
    return result


def open_facts(records: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The open facts as npc-graph@1 lists them, oldest first."""
    facts = [{"fact": r["fact"], "subject": r["subject"], "subjectId": r["subjectId"], "relation": r["relation"],
              "object": r["object"], "objectId": r["objectId"], "state": r["state"], "since": r["validFrom"]}
             for r in open_versions(records).values()]
    return sorted(facts, key=lambda f: (f["since"], f["fact"]))


def people(records: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The panel's lists: one record per character with open relationships, its own facts first."""
    facts = open_facts(records)
    names: dict[str, str] = {}
    for fact in facts:
        names.setdefault(fact["subjectId"], fact["subject"])
        names.setdefault(fact["objectId"], fact["object"])
    result = {}
    for person, name in names.items():
        own = [sentence(f["subject"], f["state"], f["object"]) for f in facts if f["subjectId"] == person]
        others = [sentence(f["subject"], f["state"], f["object"]) for f in facts if f["objectId"] == person]
        relations = (own + others)[:40]
        result[person] = {"id": person, "name": name, "relations": [line[:160] for line in relations],
                          "summary": "; ".join(relations)[:2000]}
    return result


def seeded(seeds: Mapping[str, Mapping[str, Any]], records: Mapping[str, Mapping[str, Any]],
           characters: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, Any]]:
    """The versions of turn 0 that a world's known relationships open: ("set", key, record) for each seed whose
    fact has no version yet (a story that already spoke of it wins); the first seed of a fact counts."""
    have = {record.get("fact") for record in records.values()}
    facts = [{**{k: seed[k] for k in ("subject", "relation", "object", "state")},
              "evidence": seed.get("evidence") or "Known from the start."} for _key, seed in sorted(seeds.items())]
    fresh = []
    for fact in facts:
        subject, obj = character_ref(str(fact["subject"]), characters), character_ref(str(fact["object"]), characters)
        if subject is not None and obj is not None and fact_id(subject[0], fact["relation"], obj[0]) in have:
            continue
        fresh.append(fact)
    writes, _changed = plan_changes(fresh, {}, characters, 0)
    return writes


def people_writes(before: Mapping[str, Any], records: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str, Any]]:
    """("set", id, record) / ("delete", id, None) that bring the panel's `people` records in line with the facts."""
    after = people(records)
    writes: list[tuple[str, str, Any]] = [("delete", person, None) for person in sorted(set(before) - set(after))]
    writes += [("set", person, value) for person, value in after.items() if before.get(person) != value]
    return writes


# ---- mentions and retrieval ------------------------------------------------------------------------

_SPACED = re.compile(r"^[\w' .-]+$", re.ASCII)


def _spans(text: str, name: str) -> list[tuple[int, int]]:
    if not name.strip():
        return []
    if _SPACED.match(name):
        pattern = re.compile(r"(?<!\w)" + re.escape(name.strip()) + r"(?!\w)", re.IGNORECASE)
    else:
        pattern = re.compile(re.escape(name.strip()), re.IGNORECASE)
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def mentioned(text: str, people_named: Iterable[tuple[str, Iterable[str]]]) -> list[str]:
    """Ids of the characters a text names (by name or alias), in order of first mention. Words of a spaced
    script need word boundaries (Rin is not in spring); a hit inside another character's longer name does
    not count (Tobin is not named by "Old Tobin's daughter" twice, and not as someone else)."""
    hits = [(start, end, person) for person, names in people_named for name in names for start, end in _spans(text, str(name))]
    hits.sort(key=lambda hit: (-(hit[1] - hit[0]), hit[0]))
    taken: list[tuple[int, int, str]] = []
    for start, end, person in hits:
        if any(start < t_end and t_start < end and t_person != person for t_start, t_end, t_person in taken):
            continue
        taken.append((start, end, person))
    order: list[str] = []
    for _start, _end, person in sorted(taken):
        if person not in order:
            order.append(person)
    return order


def known_people(characters: Sequence[Mapping[str, Any]], records: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, list[str]]]:
    """(id, names) of everyone the retrieval can find in a text: the world's characters and the graph's own."""
    result: dict[str, list[str]] = {}
    for character in characters:
        ref = character_ref(str(character.get("id", "")), characters)
        if ref is not None:
            result[ref[0]] = [str(n) for n in [character.get("name"), *(character.get("aliases") or [])] if n]
    for record in records.values():
        for person, name in ((record.get("subjectId"), record.get("subject")), (record.get("objectId"), record.get("object"))):
            if person and name and person not in result:
                result[person] = [str(name)]
    return list(result.items())


def retrieve(records: Mapping[str, Mapping[str, Any]], focus: Sequence[tuple[str, str, str]], *, limit: int = 12,
             hops: int = 2) -> dict[str, Any]:
    """graph-rag@1 for a turn. focus: (id, name, why) with why named | acting | present, most relevant first.

    The open facts that touch a focus character come first (a fact between two named characters before one
    with a single named end, named before acting before present), then, with hops=2, the facts of their
    neighbours; newer facts first within a rank; at most `limit`. Each fact carries its previous state (`was`)
    when it changed."""
    weight = {"named": 3.0, "acting": 2.0, "present": 1.5}
    focus_weight: dict[str, float] = {}
    for person, _name, why in focus:
        focus_weight[person] = max(focus_weight.get(person, 0.0), weight[why])
    facts = open_facts(records)
    scored: list[tuple[float, dict[str, Any]]] = []
    neighbours: set[str] = set()
    for fact in facts:
        ends = [focus_weight.get(fact["subjectId"], 0.0), focus_weight.get(fact["objectId"], 0.0)]
        if any(ends):
            scored.append((max(ends) + min(ends) / 2, fact))
            neighbours.update({fact["subjectId"], fact["objectId"]} - set(focus_weight))
    if hops >= 2:
        chosen = {id(fact) for _score, fact in scored}
        for fact in facts:
            if id(fact) not in chosen and (fact["subjectId"] in neighbours or fact["objectId"] in neighbours):
                scored.append((0.5, fact))
    scored.sort(key=lambda item: (-item[0], -item[1]["since"], item[1]["fact"]))
    closed = [r for r in records.values() if r.get("validTo") is not None]
    out, lines = [], []
    for _score, fact in scored[:max(0, limit)]:
        item = {"subject": fact["subject"], "relation": fact["relation"], "object": fact["object"], "state": fact["state"],
                "since": fact["since"]}
        before = max((r for r in closed if r["fact"] == fact["fact"]), key=lambda r: r["validTo"], default=None)
        line = sentence(fact["subject"], fact["state"], fact["object"])
        if before is not None:
            item["was"] = before["state"]
            line += f" (since turn {fact['since']}; before: {before['state']})"
        out.append(item)
        lines.append(line)
    return {"focus": [{"id": person, "name": name, "why": why} for person, name, why in focus], "facts": out, "lines": lines}


def story_text(segments: Any) -> str:
    """A narrative-engine@2 story's segments as prose: "Mira: “…”" for dialogue."""
    lines = []
    for segment in segments if isinstance(segments, list) else []:
        if not isinstance(segment, Mapping) or not str(segment.get("text") or "").strip():
            continue
        speaker = str(segment.get("speaker") or "").strip()
        text = str(segment["text"]).strip()
        lines.append(f"{speaker}: \u201c{text}\u201d" if segment.get("kind") == "dialogue" and speaker else text)
    return "\n".join(lines)

"""core-quest's pure part: the model's answer checked, applied to the quest log, summarised (no I/O here).

Rules of `apply_changes`, in the answer's order:
- a quest is the log's record with the answer's `id`, else the one whose title matches (any case),
  else a new one keyed by a slug of its title (a stable hash for titles in other scripts);
- `started`: a new quest is registered with its objectives (its title when none); a completed or
  failed one is reopened; one already open is left as it is (the change is dropped);
- `advanced` / `completed` of a quest not in the log registers it first (a `started` change is
  added before it); of a closed quest it is dropped (a finished quest does not move);
- `advanced` marks the `done` objectives finished (a new text is added as finished) and adds new
  `objectives`; `completed` finishes every objective; `failed` closes an open quest (a quest never
  started cannot fail: dropped).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

MAX_OBJECTIVES = 8
MAX_HISTORY = 30
OPEN = "active"
CLOSED = {"completed": "completed", "failed": "failed"}


class AnswerError(ValueError):
    """The model's answer does not fit core-quest.changes@1: the run fails and nothing commits."""


def fold(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def quest_key(title: str) -> str:
    key = re.sub(r"[^a-z0-9]+", "-", title.strip().lower()).strip("-")[:64].strip("-")
    if key and title.strip().isascii():
        return key
    return "quest-" + hashlib.sha1(fold(title).encode("utf-8")).hexdigest()[:10]


def check_answer(answer: Any, schema: dict) -> dict:
    import jsonschema  # here, not at import: the entry module (the segment provider) does not need it

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(answer), key=lambda e: list(e.absolute_path))
    if errors:
        where = "; ".join(f"/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:3])
        raise AnswerError(f"the model's answer does not fit core-quest.changes@1: {where}")
    return answer


def _clean(text: str, limit: int) -> str:
    return " ".join(str(text).split())[:limit]


def _find(records: dict[str, dict], change: dict) -> dict | None:
    if change.get("id") and change["id"] in records:
        return records[change["id"]]
    wanted = fold(change["quest"])
    same = [r for r in records.values() if fold(r["title"]) == wanted]
    if same:
        return same[0]
    return records.get(quest_key(change["quest"]))


def _objective_index(objectives: list[dict], text: str) -> int | None:
    wanted = fold(text)
    for index, objective in enumerate(objectives):
        have = fold(objective["text"])
        if have == wanted or (len(wanted) >= 4 and (wanted in have or have in wanted)):
            return index
    return None


def _add_objectives(record: dict, texts, done: bool) -> None:
    for text in texts or ():
        text = _clean(text, 120)
        index = _objective_index(record["objectives"], text)
        if index is not None:
            record["objectives"][index]["done"] = record["objectives"][index]["done"] or done
        elif len(record["objectives"]) < MAX_OBJECTIVES:
            record["objectives"].append({"text": text, "done": done})


def _log(record: dict, turn: int, change: str, note: str) -> None:
    record["history"] = [*record["history"], {"turn": turn, "change": change, "note": note}][-MAX_HISTORY:]
    record["note"] = note
    record["updated"] = turn


def apply_changes(records: dict[str, dict], changes: list[dict], turn: int) -> tuple[list[dict], dict[str, dict]]:
    """(the changes as applied, with the log's id and title; {key: record} of the quests to write)."""
    log = {key: _copy(record) for key, record in records.items()}
    written: dict[str, dict] = {}
    applied: list[dict] = []
    for change in changes:
        kind, note = change["change"], _clean(change["note"], 200)
        record = _find(log, change)
        if record is None:
            if kind == "failed":
                continue
            title = _clean(change["quest"], 80)
            record = {"id": quest_key(title), "title": title, "status": OPEN, "giver": _clean(change.get("giver", ""), 80),
                      "objectives": [], "note": note, "started": turn, "updated": turn, "history": []}
            _add_objectives(record, change.get("objectives") if kind == "started" else None, False)
            if not record["objectives"]:
                record["objectives"].append({"text": title[:120], "done": False})
            _log(record, turn, "started", note)
            log[record["id"]] = record
            applied.append(_applied(record, "started", note, change if kind == "started" else {}))
            if kind == "started":
                written[record["id"]] = record
                continue
        elif kind == "started":
            if record["status"] == OPEN:
                continue
            record["status"] = OPEN
            record["started"] = turn
            _add_objectives(record, change.get("objectives"), False)
            _log(record, turn, "started", note)
            applied.append(_applied(record, "started", note, change))
            written[record["id"]] = record
            continue
        elif record["status"] != OPEN:
            continue
        if kind == "advanced":
            _add_objectives(record, change.get("done"), True)
            _add_objectives(record, change.get("objectives"), False)
        elif kind == "completed":
            for objective in record["objectives"]:
                objective["done"] = True
            record["status"] = CLOSED["completed"]
        elif kind == "failed":
            record["status"] = CLOSED["failed"]
        _log(record, turn, kind, note)
        applied.append(_applied(record, kind, note, change))
        written[record["id"]] = record
    return applied, written


def _applied(record: dict, kind: str, note: str, change: dict) -> dict:
    out = {"quest": record["title"], "id": record["id"], "change": kind, "note": note}
    if kind == "started" and record.get("giver"):
        out["giver"] = record["giver"]
    for field in ("objectives", "done"):
        if change.get(field):
            out[field] = [_clean(text, 120) for text in change[field]][:6]
    return out


def _copy(record: dict) -> dict:
    return {**record, "objectives": [dict(o) for o in record.get("objectives") or []], "history": list(record.get("history") or [])}


def prompt_quests(records: dict[str, dict], limit: int = 20) -> list[dict]:
    """What the log's prompt shows: the open quests first, then the latest closed ones."""
    ordered = sorted(records.values(), key=lambda r: (r["status"] != OPEN, -r.get("updated", 0), r["id"]))[:limit]
    return [{"id": r["id"], "title": r["title"], "status": r["status"],
             "objectives": [{"text": o["text"], "done": o["done"]} for o in r["objectives"]]} for r in ordered]


def vocabulary(records) -> dict:
    """world-ir.vocabulary@1 of the quest log: one term per quest, its title as the name, its status as the note."""
    values = records.values() if isinstance(records, dict) else records
    terms = [{"id": r["id"], "name": r["title"], "note": r["status"]}
             for r in sorted((r for r in values if isinstance(r, dict) and r.get("id") and r.get("title")), key=lambda r: r["id"])]
    return {"source": "core-quest", "kind": "quest", "terms": terms[:200]}


HEADERS = {
    "en": "The player's open quests (follow them up when the story gives a chance; never finish one for the player):",
    "zh": "玩家进行中的任务（故事有机会时可以跟进，但不要替玩家完成）：",
}


def summary(records, locale: str = "en", limit: int = 5) -> str | None:
    """The state summary the story reads: the open quests, latest first, with the next objective; None when none is open."""
    values = records.values() if isinstance(records, dict) else records
    open_quests = sorted((r for r in values if isinstance(r, dict) and r.get("status") == OPEN),
                         key=lambda r: (-r.get("updated", 0), r.get("id", "")))[:max(0, limit)]
    if not open_quests:
        return None
    chinese = str(locale or "").startswith("zh")
    lines = [HEADERS["zh" if chinese else "en"]]
    for record in open_quests:
        objectives = record.get("objectives") or []
        done = sum(1 for o in objectives if o.get("done"))
        following = next((o["text"] for o in objectives if not o.get("done")), "")
        giver = record.get("giver") or ""
        if chinese:
            line = f"- {record['title']}" + (f"（委托人：{giver}）" if giver else "") + f"：已完成 {done}/{len(objectives)}"
            line += f"；下一步：{following}" if following else ""
        else:
            line = f"- {record['title']}" + (f" (for {giver})" if giver else "") + f": {done} of {len(objectives)} done"
            line += f"; next: {following}" if following else ""
        lines.append(line)
    return "\n".join(lines)

"""scene-stage: the scripted model's stage directions (stage-direction@1) for scene-stage/direction.

Deterministic and on topic: a move the player's words make to a place of <scenes> ("I walk down to
the quay") changes the scene, otherwise the story's scene cue does when it names another place; the
story's cues and speakers enter when they are not on <stage> yet; each speaker gets a performance
from what their segment does and the story's mood.
"""

from __future__ import annotations

import re
from typing import Any

from services.gateway.providers.scripted.plugin_writers import WriterCall, writes
from services.gateway.providers.scripted.story_replies import self_data_rows

_MOVE = re.compile(r"\b(?:go|goes|walk|walks|head|heads|run|runs|climb|climbs|return|returns|hurry|hurries|set off|make (?:my|your) way)"
                   r"\s+(?:back\s+|down\s+|up\s+|out\s+)?(?:to|towards?|for|into|onto)\s+(.+?)(?:[.,!?;]|$)", re.IGNORECASE)
_MOVE_ZH = re.compile(r"(?:去|前往|走到|走向|回到|来到)([^，。！？,.!?]{1,20})")
EXPRESSIONS = {"tense": "wary", "warm": "smiling", "curious": "intrigued", "mysterious": "guarded", "hopeful": "hopeful",
               "wistful": "wistful"}
EXPRESSIONS_ZH = {"tense": "警惕", "warm": "微笑", "curious": "好奇", "mysterious": "讳莫如深", "hopeful": "满怀希望", "wistful": "怅然"}


def _norm(text: Any) -> str:
    return re.sub(r"^(the|a|an)\s+", "", " ".join(str(text or "").split()).casefold())


def _value(inputs: dict[str, Any], name: str) -> Any:
    slot = inputs.get(name)
    return slot.get("value") if isinstance(slot, dict) else None


def _scene_named(text: str, scenes: dict[str, Any]) -> dict[str, Any] | None:
    wanted = _norm(text)
    for key, scene in scenes.items():
        if not isinstance(scene, dict):
            continue
        names = [key, scene.get("name"), *(scene.get("aliases") or [])]
        if any(n and (_norm(n) == wanted or (len(_norm(n)) >= 4 and _norm(n) in wanted)) for n in names):
            return {"id": key, "name": str(scene.get("name") or key)}
    return None


@writes("stage-direction@1")
def stage_direction(reply: WriterCall) -> dict[str, Any]:
    scenes = self_data_rows(reply.system, "scenes")
    stage = self_data_rows(reply.system, "stage").get("current") or {}
    cues = _value(reply.inputs, "cues") or {}
    segments = _value(reply.inputs, "story") or []
    chinese = any("\u4e00" <= ch <= "\u9fff" for ch in reply.player_text + reply.system[:2000])
    current = stage.get("scene") or {}
    direction: dict[str, Any] = {"scene": None, "timeOfDay": None, "lighting": None, "enter": [], "exit": [], "performances": [],
                                 "reason": ""}
    move = _MOVE.search(reply.player_text) or _MOVE_ZH.search(reply.player_text)
    target = _scene_named(move.group(1), scenes) if move else None
    if target is None and cues.get("scene"):
        target = _scene_named(cues["scene"], scenes)
    if target is not None and target["id"] != current.get("id"):
        direction["scene"] = target
        direction["reason"] = (f"移步{target['name']}" if chinese else f"the story moves to {target['name']}")
    on_stage = {_norm(a.get("name")) for a in stage.get("actors") or [] if isinstance(a, dict)}
    if direction["scene"] is not None:
        on_stage = set()
    names = [*cues.get("present", []), *cues.get("speakers", [])]
    names.extend(segment["speaker"] for segment in (segments if isinstance(segments, list) else [])
                 if isinstance(segment, dict) and segment.get("speaker") and segment.get("kind") in ("dialogue", "action"))
    mood = str(cues.get("mood") or "")
    seen: list[str] = []
    for name in names:
        if not isinstance(name, str) or not name.strip() or _norm(name) in {_norm(s) for s in seen}:
            continue
        seen.append(name)
        if _norm(name) not in on_stage:
            direction["enter"].append(name)
        kinds = {s.get("kind") for s in segments if isinstance(s, dict) and _norm(s.get("speaker")) == _norm(name)} if isinstance(segments, list) else set()
        if chinese:
            performance = {"character": name, "pose": "俯身向前" if "action" in kinds else "面向你说话",
                           "expression": EXPRESSIONS_ZH.get(mood, "平静"), "position": "你身旁"}
        else:
            performance = {"character": name, "pose": "leaning in" if "action" in kinds else "facing you",
                           "expression": EXPRESSIONS.get(mood, "calm"), "position": "near you"}
        direction["performances"].append(performance)
    if not direction["reason"]:
        direction["reason"] = ("人物登场" if chinese else "characters step forward") if direction["enter"] else \
            ("神态变化" if chinese else "how the characters appear")
    return direction

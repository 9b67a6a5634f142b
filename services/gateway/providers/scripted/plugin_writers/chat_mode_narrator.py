"""chat-mode-narrator's plan (chat-mode-narrator.plan@1): who speaks this turn, what each wants, the beats.

Deterministic and on topic: the speakers are who is on stage (runtime-inputs.cast, scene-cast@1, when it lists
anyone), else who spoke in the last story (runtime-inputs.previous, the committed latest-story export), else the world's cast
shown in the prompt; the beats answer the player's words and a dice verdict when one is bound."""

from __future__ import annotations

import random
import re
from typing import Any

from ..story_replies import world_cast
from . import WriterCall, writes

PLAN = "chat-mode-narrator.plan@1"
MAX_SPEAKERS = re.compile(r"At most (\d) characters besides|最多 (\d) 个角色开口")
WANTS = (
    "to find out what the newcomer is really after",
    "to be left in peace, though curiosity wins",
    "to steer the talk towards what worries them",
    "to help, if it costs nothing",
)
WANTS_ZH = ("弄清来人真正的目的", "图个清静，却按捺不住好奇", "把话题引到自己担心的事上", "只要不吃亏，就帮一把")
TONES = ("wary", "warm", "dry", "eager")
TONES_ZH = ("警惕", "热情", "冷淡", "急切")
VERDICTS = {
    "critical-success": ("it goes better than hoped", "结果出奇地好"),
    "success": ("it works", "成功了"),
    "failure": ("it does not work", "没有成功"),
    "critical-failure": ("it goes badly wrong", "结果一团糟"),
}


def _value(inputs: dict[str, Any], binding: str) -> Any:
    slot = inputs.get(binding)
    return slot.get("value") if isinstance(slot, dict) else None


def names_of(value: Any) -> list[str]:
    """Character names in a bound value of any reasonable shape: names, {name} objects, or an object whose
    present / cast / characters / segments list holds them."""
    names: list[str] = []

    def add(name: Any) -> None:
        if isinstance(name, str) and name.strip() and name.strip() not in names:
            names.append(name.strip()[:80])

    if isinstance(value, dict):
        for key in ("present", "cast", "characters", "onStage", "actors"):
            if isinstance(value.get(key), list):
                return names_of(value[key])
        if isinstance(value.get("segments"), list):
            for segment in value["segments"]:
                if isinstance(segment, dict) and segment.get("kind") in ("dialogue", "action"):
                    add(segment.get("speaker"))
            return names
        add(value.get("name"))
    elif isinstance(value, list):
        for item in value:
            add(item.get("name") or item.get("displayName") if isinstance(item, dict) else item)
    return names


def _verdict(inputs: dict[str, Any], chinese: bool) -> str:
    for binding in ("check", "tabletop"):
        checks = (_value(inputs, binding) or {}).get("checks") if isinstance(_value(inputs, binding), dict) else None
        if checks and isinstance(checks[0], dict) and checks[0].get("outcome") in VERDICTS:
            return VERDICTS[checks[0]["outcome"]][1 if chinese else 0]
    return ""


def speakers_for(inputs: dict[str, Any], system: str) -> list[str]:
    on_stage = names_of(_value(inputs, "cast"))
    if on_stage:
        return on_stage  # the stage decides who can speak
    # Nobody placed on stage yet (or no stage): who spoke last, else the world's cast; the stage follows the story.
    return names_of(_value(inputs, "previous")) or [name for name, _role in world_cast(system)]


def write_plan(player_text: str, system: str, inputs: dict[str, Any], seed: str) -> dict[str, Any]:
    chinese = bool(re.search(r"[\u4e00-\u9fff]", player_text or system[:400]))
    rng = random.Random(seed)
    limit = MAX_SPEAKERS.search(system)
    most = int(next(group for group in limit.groups() if group)) if limit else 3
    names = speakers_for(inputs, system)[:min(most, 2)]
    action = " ".join((player_text or "").split()).rstrip(" .!?。！？")[:160]
    opening = _value(inputs, "opening")
    verdict = _verdict(inputs, chinese)
    beats: list[dict[str, str]] = []
    if isinstance(opening, dict) and opening.get("brief"):
        beats.append({"beat": "故事开场：" + str(opening["brief"])[:150] if chinese else "The story opens: " + str(opening["brief"])[:150]})
    elif action:
        beats.append({"beat": (f"玩家的行动：{action}" if chinese else f"The player's action: {action}") + (f"（{verdict}）" if chinese and verdict else f" ({verdict})" if verdict else "")})
    speakers = []
    for index, name in enumerate(names):
        pick = (rng.randrange(len(WANTS)) + index) % len(WANTS)
        speakers.append({"name": name, "wants": WANTS_ZH[pick] if chinese else WANTS[pick], "tone": TONES_ZH[pick] if chinese else TONES[pick]})
        if index == 0:
            beats.append({"speaker": name, "beat": "回应玩家，说出自己的想法" if chinese else "answers the player and says what they think"})
        else:
            beats.append({"speaker": name, "beat": f"接过{names[0]}的话，提出自己的要求" if chinese else f"cuts in after {names[0]} with a demand of their own"})
    if names:
        beats.append({"speaker": names[0], "beat": "向玩家提出一个问题，等待回答" if chinese else "asks the player a question and waits for the answer"})
    else:
        beats.append({"beat": "场景安静下来，等待玩家的下一步" if chinese else "the scene settles, waiting for the player's next move"})
    plan: dict[str, Any] = {"speakers": speakers, "beats": beats[:8]}
    cast, previous = _value(inputs, "cast"), _value(inputs, "previous")
    scene = (cast.get("scene") or {}).get("name") if isinstance(cast, dict) and isinstance(cast.get("scene"), dict) else None
    if not scene and isinstance(previous, dict):
        scene = (previous.get("cues") or {}).get("scene")
    if isinstance(scene, str) and scene:
        plan["scene"] = scene[:200]
    return plan


@writes(PLAN)
def chat_mode_plan(reply: WriterCall) -> dict[str, Any]:
    return write_plan(reply.player_text, reply.system, reply.inputs, reply.seed)

"""The model's part of history-compaction: the prompt (en, zh), the answer's schema, and the summary
made from a structured answer."""

from __future__ import annotations

from typing import Any

SCHEMA = {
    "title": "history-compaction.summary@1",
    "type": "object",
    "required": ["summary", "facts"],
    "additionalProperties": False,
    "properties": {
        "summary": {"type": "string", "minLength": 1, "description": "What happened, in order, in a few sentences."},
        "facts": {"type": "array", "maxItems": 12, "items": {"type": "string", "minLength": 1},
                  "description": "What the story must not forget: names, places, items, promises, open threads."},
    },
}

SYSTEM = {
    "en": ("You summarise the earlier part of an interactive story so it can be told on without it. "
           "Write in English, in the past tense, about the player's character as \"the player\". "
           "Keep to what the turns say: never invent, judge or foreshadow. "
           "Answer one JSON object {\"summary\": \"...\", \"facts\": [\"...\"]}: summary tells what happened, in order, "
           "in at most {target} characters together with the facts; facts are the short things the story must not forget "
           "(names, places, items the player holds, promises, open threads)."),
    "zh": ("你为互动故事较早的部分写摘要，让故事不读原文也能继续讲下去。"
           "用简体中文和过去时写，把玩家的角色称为“玩家”。"
           "只写这些回合里写了的事：不要编造、评价或预告。"
           "回复一个 JSON 对象 {\"summary\": \"...\", \"facts\": [\"...\"]}：summary 按顺序讲发生了什么，"
           "连同 facts 一共不超过 {target} 个字符；facts 是故事不能忘的简短事实（人名、地点、玩家持有的物品、承诺、未解的线索）。"),
}

LABELS = {
    "en": {"previous": "Summary so far:", "turns": "Turns to fold into it:", "player": "Player", "story": "Story",
           "facts": "Remember:"},
    "zh": {"previous": "已有的摘要：", "turns": "要并入摘要的回合：", "player": "玩家", "story": "故事", "facts": "要记住的："},
}


def language(locale: Any) -> str:
    return "zh" if str(locale or "").lower().startswith("zh") else "en"


def model_request(request: dict[str, Any], slot: str, timeout_ms: int) -> dict[str, Any]:
    """The one model call the provider asks the kernel for: {slot, system, prompt, schema, timeoutMs}."""
    lang = language(request.get("locale"))
    words = LABELS[lang]
    target = int(request.get("targetChars", 4000))
    lines = []
    if str(request.get("previousSummary") or "").strip():
        lines += [words["previous"], str(request["previousSummary"]).strip(), ""]
    lines.append(words["turns"])
    for message in request.get("messages") or []:
        text = " ".join(str(message.get("text") or "").split())
        if text:
            lines.append(f"{words['player'] if message.get('role') == 'player' else words['story']}: {text}")
    return {"slot": slot, "system": SYSTEM[lang].replace("{target}", str(target)), "prompt": "\n".join(lines),
            "schema": SCHEMA, "timeoutMs": timeout_ms}


def summary_from_answer(answer: Any, locale: Any, target: int) -> str:
    """The summary text of the model's structured answer; ValueError when it is not {summary, facts}."""
    if not isinstance(answer, dict) or not isinstance(answer.get("summary"), str) or not answer["summary"].strip():
        raise ValueError("history.compact@2: the model's answer has no summary")
    facts = answer.get("facts") or []
    if not isinstance(facts, list) or not all(isinstance(fact, str) for fact in facts):
        raise ValueError("history.compact@2: the model's facts must be a list of text")
    text = " ".join(answer["summary"].split())
    kept = [f"- {' '.join(fact.split())}" for fact in facts if fact.strip()]
    while kept and len("\n".join([text, LABELS[language(locale)]["facts"], *kept])) > target:
        kept.pop()
    lines = [text, LABELS[language(locale)]["facts"], *kept] if kept else [text]
    return "\n".join(lines)[:target]

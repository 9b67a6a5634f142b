"""history-compaction: the history.compact@2 provider.

The kernel calls it (between PreCompaction and PostCompaction) when the story so far passes the
prompt budget, with the older messages to fold: {messages: [{seq, role, text}], previousSummary?,
targetChars, locale}. It answers {summary}: the previous summary, then one line per folded
player turn: what the player did and the first sentence of what answered it. No model call, so
it is quick, repeatable and never invents anything; the summary keeps to targetChars by
dropping its oldest lines first.
"""

import re

_SENTENCE = re.compile(r"^(.+?[.!?。！？])(\s|$)", re.DOTALL)
MAX_SENTENCE = 200
LABELS = {"en": ("The player", "Earlier"), "zh": ("玩家", "此前")}


def register(covel):
    covel.provide_extension("history.compact@2", "summaries", compact)


def first_sentence(text: str) -> str:
    text = " ".join((text or "").split())
    match = _SENTENCE.match(text)
    sentence = match.group(1) if match else text
    return sentence if len(sentence) <= MAX_SENTENCE else sentence[: MAX_SENTENCE - 1] + "…"


def compact(ctx, request: dict) -> dict:
    player, _ = LABELS["zh" if str(request.get("locale", "")).startswith("zh") else "en"]
    lines: list[str] = []
    for message in request.get("messages") or []:
        if not isinstance(message, dict) or not str(message.get("text") or "").strip():
            continue
        sentence = first_sentence(str(message["text"]))
        if message.get("role") == "player":
            lines.append(f"{player}: {sentence}")
        elif lines and not lines[-1].endswith("»"):
            lines[-1] += f" → {sentence} »"
        else:
            lines.append(f"{sentence} »")
    lines = [line.removesuffix(" »").removesuffix("»").rstrip() for line in lines]
    previous = str(request.get("previousSummary") or "").strip()
    summary_lines = ([previous] if previous else []) + lines
    target = int(request.get("targetChars") or 4000)
    while len(summary_lines) > 1 and len("\n".join(summary_lines)) > target:
        summary_lines.pop(0)
    return {"summary": "\n".join(summary_lines)[:target] or "(nothing happened yet)"}

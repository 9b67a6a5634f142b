"""history-compaction: the history.compact@2 provider.

The kernel calls it (between PreCompaction and PostCompaction) when the story so far passes the
prompt budget, with the older messages to fold: {messages: [{seq, role, text}], previousSummary?,
targetChars, locale}. It answers {summary}: the previous summary, then one line per folded
player turn: what the player did and the first sentence of what answered it. No model call, so
it is quick, repeatable and never invents anything; the summary keeps to targetChars by
dropping its oldest lines first.

With the setting `modelSlot` (e.g. `fast`), the answer also asks the kernel for one model call
(`model: {slot, system, prompt, schema, timeoutMs}`, lib/model_prompt.py); the kernel calls again
with the structured answer as `modelAnswer`, and the summary is made from it. When the model
fails or times out, the mechanical summary of the first answer stands.
"""

import re

from ..lib.model_prompt import model_request, summary_from_answer

# English sentences end at . ! ? before a space; Chinese ones at 。！？ with no space after.
_SENTENCE = re.compile(r"^(.+?(?:[.!?](?=\s|$)|[。！？]))", re.DOTALL)
MAX_SENTENCE = 200
LABELS = {"en": ("The player", ": "), "zh": ("玩家", "：")}
DEFAULT_TIMEOUT_MS = 20000


def register(covel):
    covel.provide_extension("history.compact@2", "summaries", compact)


def first_sentence(text: str) -> str:
    text = " ".join((text or "").split())
    match = _SENTENCE.match(text)
    sentence = match.group(1) if match else text
    return sentence if len(sentence) <= MAX_SENTENCE else sentence[: MAX_SENTENCE - 1] + "…"


def check_request(request) -> None:
    """A request that is not history.compact@2's input fails the call with the reason (nothing is
    summarised, so the kernel keeps the history as it is)."""
    if not isinstance(request, dict):
        raise ValueError("history.compact@2: the request is not an object")
    messages = request.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) and isinstance(m.get("text", ""), str) for m in messages):
        raise ValueError("history.compact@2: messages must be a list of {seq, role, text}")
    target = request.get("targetChars", 4000)
    if isinstance(target, bool) or not isinstance(target, int) or target < 1:
        raise ValueError(f"history.compact@2: targetChars must be a positive whole number, not {target!r}")
    if request.get("previousSummary") is not None and not isinstance(request["previousSummary"], str):
        raise ValueError("history.compact@2: previousSummary must be text")


def compact(ctx, request: dict) -> dict:
    check_request(request)
    target = int(request.get("targetChars", 4000))
    if "modelAnswer" in request:
        return {"summary": summary_from_answer(request["modelAnswer"], request.get("locale"), target)}
    answer = {"summary": mechanical_summary(request)}
    settings = ctx.get_own_settings() if ctx is not None else {}
    slot = settings.get("modelSlot")
    if isinstance(slot, str) and slot.strip():
        timeout = settings.get("modelTimeoutMs")
        answer["model"] = model_request(request, slot.strip(), timeout if isinstance(timeout, int) and timeout > 0 else DEFAULT_TIMEOUT_MS)
    return answer


def mechanical_summary(request: dict) -> str:
    player, colon = LABELS["zh" if str(request.get("locale", "")).startswith("zh") else "en"]
    lines: list[str] = []
    for message in request.get("messages") or []:
        if not isinstance(message, dict) or not str(message.get("text") or "").strip():
            continue
        sentence = first_sentence(str(message["text"]))
        if message.get("role") == "player":
            lines.append(f"{player}{colon}{sentence}")
        elif lines and not lines[-1].endswith("»"):
            lines[-1] += f" → {sentence} »"
        else:
            lines.append(f"{sentence} »")
    lines = [line.removesuffix(" »").removesuffix("»").rstrip() for line in lines]
    previous = str(request.get("previousSummary") or "").strip()
    summary_lines = ([previous] if previous else []) + lines
    target = int(request.get("targetChars", 4000))
    while len(summary_lines) > 1 and len("\n".join(summary_lines)) > target:
        summary_lines.pop(0)
    return "\n".join(summary_lines)[:target] or "(nothing happened yet)"

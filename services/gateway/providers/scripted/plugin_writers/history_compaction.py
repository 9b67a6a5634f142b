"""history-compaction: the scripted model's structured summary of the turns it is asked to fold
(the model call the history.compact@2 provider asks for when its `modelSlot` is set)."""

from __future__ import annotations

from typing import Any

from services.gateway.providers.scripted.plugin_writers import WriterCall, writes

PLAYER_LABELS = ("Player: ", "玩家: ")


@writes("history-compaction.summary@1")
def summary(reply: WriterCall) -> dict[str, Any]:
    lines = reply.player_text.splitlines()
    actions = [line.split(": ", 1)[1].strip() for line in lines if line.startswith(PLAYER_LABELS)]
    chinese = any(line.startswith(PLAYER_LABELS[1]) for line in lines)
    if chinese:
        text = "玩家先后" + "；然后".join(action.rstrip("。") for action in actions) + "。" if actions else "此前没有发生什么。"
        facts = [f"已有 {len(actions)} 个回合并入摘要。"]
    else:
        text = ("In the earlier turns the player did this, in order: " + " Then: ".join(actions)) if actions else "Nothing happened yet."
        facts = [f"{len(actions)} earlier turns are folded into this summary."]
    return {"summary": text, "facts": facts}

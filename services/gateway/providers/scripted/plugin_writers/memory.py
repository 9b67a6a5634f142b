"""memory: the scripted model's memory-block edit (the memory.block-edit@1 service's tool).

An agent that imports the service and reads a player line with "remember: <text>" appends <text> to
the scene block, once per conversation; with no such line it edits nothing.
"""

from __future__ import annotations

from typing import Any

from services.gateway.providers.scripted.plugin_writers import WriterCall, plans_tool

MARKERS = ("remember:", "记住：")


@plans_tool("memory-block-edit")
def edit_block(reply: WriterCall) -> dict[str, Any] | None:
    text = reply.player_text
    for marker in MARKERS:
        index = text.lower().find(marker)
        if index >= 0 and text[index + len(marker):].strip():
            return {"label": "scene", "append": text[index + len(marker):].strip()}
    return None

"""The messages an agent runtime sends: framework preamble, prompt, history, the player's input."""

from __future__ import annotations

import json
from typing import Any

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2
from shared.model_view import model_facing
from shared.structs import from_struct

CONTINUE_PROMPT = "(The player waits. Continue the story from where it stopped.)"
LANGUAGE_NAMES = {"en": "English", "zh": "Simplified Chinese"}


def framework_preamble(runtime: registry_pb2.RuntimeManifest, locale: str, story: bool) -> str:
    """What the kernel always puts first: the runtime frame, the output language, the completion contract."""
    language = LANGUAGE_NAMES.get(locale, "English")
    lines = [
        f'You are the runtime "{runtime.runtime_id}" of the plugin "{runtime.plugin_id}" in an interactive story.',
        f"Write everything the player reads in {language}.",
    ]
    if story:
        lines.append(
            "Reply with one JSON object that matches the response format narrative-engine@2: "
            '"segments" is the story in order, each {"kind": "narration" | "dialogue" | "action", '
            '"speaker": the character\'s name (dialogue and action only), "text": one paragraph}; '
            '"cues" is optional {"scene", "present", "mood"}; "yield" is "user" to hand the turn back to the player.'
        )
    return "\n".join(lines)


def runtime_prompt(runtime: registry_pb2.RuntimeManifest, locale: str) -> str:
    return runtime.prompt_variants.get(locale) or runtime.prompt


def history_messages(messages: list[common_pb2.Message], max_turns: int) -> list[dict[str, Any]]:
    """The conversation log as chat messages: the last `max_turns` player turns and what followed them."""
    player_positions = [index for index, message in enumerate(messages) if message.role == "player"]
    start = player_positions[-max_turns] if len(player_positions) > max_turns else 0
    chat: list[dict[str, Any]] = []
    for message in messages[start:]:
        if message.role == "player":
            chat.append({"role": "user", "content": message.text})
        elif message.role == "story":
            chat.append({"role": "assistant", "content": message.text})
    return chat


SUMMARY_CHARS = 200


def self_data_block(declaration: dict[str, Any], entries: dict[str, Any]) -> str:
    """io.selfData: one row per key, `- <key> | <value JSON>` (summary: cut to 200 characters),
    newest keys last, bookkeeping fields removed, an `id` equal to the key not repeated."""
    namespace = declaration.get("namespace", "")
    tag = str(declaration.get("as") or f"<{namespace}>").strip("<>") or namespace
    limit = int(declaration.get("maxEntries") or 50)
    rows = []
    for key, value in list(entries.items())[-limit:]:
        shown = model_facing(value)
        if isinstance(shown, dict) and shown.get("id") == key:
            shown = {field: item for field, item in shown.items() if field != "id"}
        text = json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
        if (declaration.get("format") or "summary") == "summary" and len(text) > SUMMARY_CHARS:
            text = text[: SUMMARY_CHARS - 1] + "…"
        rows.append(f"- {key} | {text}")
    body = "\n".join(rows) if rows else "(none yet)"
    return f"<{tag}>\n{body}\n</{tag}>"


def static_segments(runtime: registry_pb2.RuntimeManifest, story: bool, packages) -> list[dict[str, Any]]:
    """contributes.prompt segments this runtime reads: its own package's, and every active package's
    when it writes the story. Each carries its pluginId for promptSegments."""
    found = []
    for package in packages:
        if package.id != runtime.plugin_id and not story:
            continue
        for segment in ((from_struct(package.definition).get("contributes") or {}).get("prompt") or []):
            if isinstance(segment, dict) and segment.get("content"):
                found.append({**segment, "pluginId": package.id})
    return found


def runtime_inputs_block(inputs: dict[str, Any]) -> str:
    """The bound inputs as the model reads them: runtime-inputs.<binding>.value, bookkeeping fields removed."""
    if not inputs:
        return ""
    body = json.dumps(model_facing(inputs), ensure_ascii=False, indent=1)
    return f"<runtime-inputs>\n{body}\n</runtime-inputs>"


def assemble(
    runtime: registry_pb2.RuntimeManifest,
    locale: str,
    story: bool,
    history: list[common_pb2.Message],
    player_message: str,
    max_turns: int,
    inputs: dict[str, Any] | None = None,
    self_data: list[str] | None = None,
    segments: list[dict[str, Any]] | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    segments = segments or []
    system_segments = [seg["content"] for seg in segments if seg.get("position") == "system"]
    system_prompt = "\n\n".join(
        part
        for part in (framework_preamble(runtime, locale, story), runtime_prompt(runtime, locale), *system_segments,
                     runtime_inputs_block(inputs or {}), *(self_data or []))
        if part
    )

    def as_message(segment: dict[str, Any]) -> dict[str, Any]:
        return {"role": segment.get("role") or "system", "content": segment["content"]}

    messages = [as_message(seg) for seg in segments if seg.get("position") == "pre-history"]
    past = history_messages(history, max_turns)
    messages += past
    messages += [as_message(seg) for seg in segments if seg.get("position") == "post-history"]
    if player_message:
        messages.append({"role": "user", "content": player_message})
    elif past and past[-1]["role"] == "assistant":
        # A continuation: no new player input, the story goes on from where it stopped.
        messages.append({"role": "user", "content": CONTINUE_PROMPT})
    for segment in segments:
        position = segment.get("position")
        if isinstance(position, dict) and isinstance(position.get("depth"), int):
            # {depth: N}: N messages from the end of the conversation.
            messages.insert(max(0, len(messages) - position["depth"]), as_message(segment))
    return system_prompt, messages

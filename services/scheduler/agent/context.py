"""The messages an agent runtime sends: framework preamble, prompt, history, the player's input."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

from covel.common.v1 import common_pb2
from services.scheduler.agent.prompt_templates import render
from services.scheduler.catalogue import Package, Runtime
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from shared.kernel_prompts import CONTINUE_PROMPT, TASK_PROMPT
from shared.plugin_sdk.locale_text import instruction_locale_for
from shared.plugin_sdk.model_view import model_facing
from shared.structs import from_struct

# What an input bound to this execution's story reads: the story is the assistant message of the conversation.
STORY_POINTER = "(the story of this turn: the assistant message after the player's input in the conversation; not repeated here)"
LANGUAGE_NAMES = {"en": "English", "zh": "Simplified Chinese"}


def framework_preamble(runtime: Runtime, locale: str, story: bool) -> str:
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


# Only Simplified Chinese has prompt variants (PLUGIN.zh.md / RUNTIME.zh.md).
VARIANT_LOCALE = "zh"


# COVEL_INSTRUCTION_LOCALE ("en" or "zh"): one instruction language for every session, set once
# when the scheduler starts (configure_instruction_locale); "" follows each session's locale.
_instruction_locale = ""


def configure_instruction_locale(locale: str) -> None:
    global _instruction_locale
    _instruction_locale = locale


def variant_locale(locale: str) -> str:
    """The prompt variant a session reads: `zh` for Simplified Chinese; "" (the main file) for every
    other language, Traditional Chinese included. A fixed instruction locale decides for every session
    (the SDK's instruction_locale_for: one rule for the kernel and plugin code)."""
    return VARIANT_LOCALE if instruction_locale_for(locale, _instruction_locale) == VARIANT_LOCALE else ""


def runtime_prompt(runtime: Runtime, locale: str) -> str:
    variant = variant_locale(locale)
    return (runtime.prompt_variants.get(variant) if variant else "") or runtime.prompt


# agent:bootstrap: what one injected file and all of them may add to the system prompt.
BOOTSTRAP_FILE_MAX_CHARS = 20_000
BOOTSTRAP_TOTAL_MAX_CHARS = 60_000


def prompt_file(runtime: Runtime, locale: str, workspace_dir: str) -> dict[str, Any]:
    """The runtime's own prompt as the first bootstrap record: PLUGIN.md of an inline runtime,
    runtimes/<id>/RUNTIME.md otherwise (the locale's variant when there is one)."""
    inline = runtime.runtime_id == runtime.plugin_id
    base = "PLUGIN" if inline else "RUNTIME"
    variant = variant_locale(locale)
    name = f"{base}.{variant}.md" if variant and runtime.prompt_variants.get(variant) else f"{base}.md"
    relative = PurePosixPath(name) if inline else PurePosixPath("runtimes", runtime.runtime_id.split("/", 1)[-1], name)
    path = str(PurePosixPath(workspace_dir) / relative) if workspace_dir else str(relative)
    return {"name": name, "path": path, "missing": False, "content": runtime_prompt(runtime, locale)}


async def resolve_bootstrap(hooks: HookBus, scope: ExecutionScope, runtime: Runtime,
                            packages: Iterable[Package] | None) -> list[dict[str, Any]] | None:
    """agent:bootstrap (awaited): handlers may replace or extend the bootstrap files; None when
    they left them as they were (or nobody listens), so the prompt is assembled as usual."""
    events = getattr(hooks, "events", None)
    if events is None:
        return None
    package = next((p for p in packages or [] if p.id == runtime.plugin_id), None)
    workspace = package.root_dir if package is not None else ""
    files = [prompt_file(runtime, scope.session.locale, workspace)]
    resolved = await events.agent_bootstrap(scope.session, runtime, workspace, files)
    return None if resolved == files else resolved


def bootstrap_text(files: list[dict[str, Any]], own_prompt: str) -> list[str]:
    """What the bootstrap files add to the system prompt, in order: paths deduplicated, missing or
    content-less records skipped, each file and the total cut to the context budget. The runtime's
    own prompt goes in as it is, any other file under a `## <name>` heading."""
    seen: set[str | None] = set()
    parts: list[str] = []
    total = 0
    for record in files:
        path, content = record.get("path"), record.get("content")
        if path in seen or record.get("missing") is True or not isinstance(content, str) or not content.strip():
            continue
        seen.add(path)
        text = content.strip()[:BOOTSTRAP_FILE_MAX_CHARS]
        text = text if content == own_prompt else f"## {record.get('name') or path}\n\n{text}"
        text = text[: max(0, BOOTSTRAP_TOTAL_MAX_CHARS - total)]
        if not text:
            break
        total += len(text)
        parts.append(text)
    return parts


def history_messages(messages: list[common_pb2.Message], max_turns: int, include_summaries: bool = True) -> list[dict[str, Any]]:
    """The conversation log as chat messages: those of the last `max_turns` turns, counted by turn id (a
    continuation turn without a player message counts, a turn with two player messages counts once).

    After a history compaction the log up to the latest summary's throughSeq is read as that
    summary (first, as a system message) instead of the messages it folded."""
    summary = next((m for m in reversed(messages) if m.role == "summary"), None)
    through = int(from_struct(summary.metadata).get("throughSeq", 0)) if summary is not None else 0
    messages = [m for m in messages if m.role != "summary" and m.seq > through]
    start = window_start(messages, max_turns)
    chat: list[dict[str, Any]] = []
    if summary is not None and include_summaries:
        chat.append({"role": "system", "content": f"{SUMMARY_HEADING}\n{summary.text}"})
    for message in messages[start:]:
        if message.role == "player":
            chat.append({"role": "user", "content": message.text})
        elif message.role == "story":
            chat.append({"role": "assistant", "content": message.text})
    return chat


def window_start(messages: list[common_pb2.Message], max_turns: int) -> int:
    """The index of the first message of the last `max_turns` turns (a message without a turn id is a turn alone)."""
    turns: list[str] = []
    firsts: list[int] = []
    for index, message in enumerate(messages):
        turn = message.turn_id or f"seq:{message.seq}"
        if not turns or turns[-1] != turn:
            turns.append(turn)
            firsts.append(index)
    return firsts[-max_turns] if 0 < max_turns < len(firsts) else 0


SUMMARY_HEADING = "Summary of the story so far (earlier turns, compacted):"


def static_segments(runtime: Runtime, story: bool, packages: list[Package], locale: str = "") -> list[dict[str, Any]]:
    """contributes.prompt segments this runtime reads: its own package's, and every active package's
    when it writes the story. Each carries its pluginId for promptSegments. A Simplified Chinese
    session reads a segment's translation from PLUGIN.zh.md (the definition's promptSegmentVariants,
    captured at load) where there is one; id, position and role are always the main file's."""
    variant = variant_locale(locale)
    found = []
    for package in packages:
        if package.id != runtime.plugin_id and not story:
            continue
        translated = package.prompt_segment_variants.get(variant, {}) if variant else {}
        for segment in package.contributes.prompt or []:
            if segment.content:
                content = translated.get(segment.id)
                found.append({**segment.to_json(), **({"content": content} if content else {}), "pluginId": package.id})
    return found


def story_pointers(inputs: dict[str, Any], story: str) -> dict[str, Any]:
    """Inputs whose value is this execution's story text read a pointer to its message instead of a copy."""
    if not story:
        return inputs
    pointed: dict[str, Any] = {}
    for binding, bound in inputs.items():
        if isinstance(bound, dict) and bound.get("value") == story:
            pointed[binding] = {**bound, "value": STORY_POINTER}
        else:
            pointed[binding] = STORY_POINTER if bound == story else bound
    return pointed


def runtime_inputs_block(inputs: dict[str, Any]) -> str:
    """The bound inputs as the model reads them: runtime-inputs.<binding>.value, bookkeeping fields removed."""
    if not inputs:
        return ""
    body = json.dumps(model_facing(inputs), ensure_ascii=False, indent=1)
    return f"<runtime-inputs>\n{body}\n</runtime-inputs>"


def runtime_activation_block(activation: dict[str, Any] | None) -> str:
    """What started a manual or event runtime, as the model reads it: the manual payload, or {events} of an event
    follower ({topic, payload, source} each), bookkeeping fields removed. Nothing for a runtime the turn scheduled."""
    if not activation:
        return ""
    body = json.dumps(model_facing(activation), ensure_ascii=False, indent=1)
    return f"<runtime-activation>\n{body}\n</runtime-activation>"


def assemble(
    runtime: Runtime,
    locale: str,
    story: bool,
    history: list[common_pb2.Message],
    player_message: str,
    max_turns: int,
    inputs: dict[str, Any] | None = None,
    self_data: list[str] | None = None,
    segments: list[dict[str, Any]] | None = None,
    bootstrap: list[dict[str, Any]] | None = None,
    include_summaries: bool = True,
    world_values: dict[str, Any] | None = None,
    execution_story: str = "",
    activation: dict[str, Any] | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """The system prompt and messages; the runtime's prompt with its placeholders filled from `world_values`.
    `execution_story`: the story this execution told already (a runtime after the story): it follows the player's
    input as an assistant message, and an input bound to it reads a pointer to that message. `activation`: the payload
    that started a manual or event runtime (<runtime-activation>, after the inputs)."""
    segments = segments or []
    system_segments = [seg["content"] for seg in segments if seg.get("position") == "system"]
    # agent:bootstrap handlers changed the files: they stand where the runtime's prompt stands.
    own_prompt = render(runtime_prompt(runtime, locale), world_values or {})
    prompt_parts = [own_prompt] if bootstrap is None else bootstrap_text(bootstrap, own_prompt)
    system_prompt = "\n\n".join(
        part
        for part in (framework_preamble(runtime, locale, story), *prompt_parts, *system_segments,
                     runtime_inputs_block(story_pointers(inputs or {}, execution_story)),
                     runtime_activation_block(activation), *(self_data or []))
        if part
    )

    def as_message(segment: dict[str, Any]) -> dict[str, Any]:
        return {"role": segment.get("role") or "system", "content": segment["content"]}

    messages = [as_message(seg) for seg in segments if seg.get("position") == "pre-history"]
    if max_turns > 0:
        past = history_messages(history, max_turns, include_summaries)
    else:
        # maxTurns 0: no earlier turns and no summary; only the current turn, which is already in the
        # log when there is no new player input (a detached job after its turn commits).
        past = [] if player_message else history_messages(history, 1, False)
    messages += past
    messages += [as_message(seg) for seg in segments if seg.get("position") == "post-history"]
    if player_message:
        messages.append({"role": "user", "content": player_message})
    if execution_story:
        messages += [{"role": "assistant", "content": execution_story}, {"role": "user", "content": TASK_PROMPT}]
    elif not player_message and past and past[-1]["role"] == "assistant":
        # No new player input: the story goes on from where it stopped; any other runtime (a detached
        # job after its turn) is told to do its task, not to continue a story it does not write.
        messages.append({"role": "user", "content": CONTINUE_PROMPT if story else TASK_PROMPT})
    for segment in segments:
        position = segment.get("position")
        if isinstance(position, dict) and isinstance(position.get("depth"), int):
            # {depth: N}: N messages from the end of the conversation.
            messages.insert(max(0, len(messages) - position["depth"]), as_message(segment))
    return system_prompt, messages

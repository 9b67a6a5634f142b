"""The kernel's story shape (narrative-engine@2) and its lenient normalisation before commit."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MAX_SEGMENTS = 60
MAX_SEGMENT_CHARS = 4000
MAX_SPEAKER_CHARS = 80
# cues: a scene name of at most 200 characters, at most 32 present names, a mood of at most 80.
MAX_SCENE_CHARS = 200
MAX_PRESENT = 32
MAX_MOOD_CHARS = 80
KINDS = ("narration", "dialogue", "action")
# A trailing paragraph that asks the player what to do, maybe listing options, is dropped.
_OPTION_ITEM = r"([-*•]|\d+[.)、])\s*\S.*"
_OPTION_PROMPT = re.compile(
    r"^(so,?\s*)?(what (will|do|would) you do( now| next)?|what do you want to do( now| next)?"
    r"|你(会|要|想)怎么做|你接下来(会|要)怎么做)\s*[?？]?(\s*\n\s*" + _OPTION_ITEM + r")*$",
    re.IGNORECASE,
)
# A paragraph that is nothing but a list of options ("1. Fight\n2. Flee").
_OPTION_LIST = re.compile(r"^" + _OPTION_ITEM + r"(\n\s*" + _OPTION_ITEM + r")*$")


class EmptyStory(ValueError):
    """The reply had no story text at all."""


# What the kernel adds to a story's output beyond what the model answered (narrative-engine@2 has no place for
# it): a committed story export is checked against the contract without it.
DERIVED_FIELDS = ("narrativeOutput",)


@dataclass
class Story:
    segments: list[dict[str, str]]
    cues: dict[str, Any] = field(default_factory=dict)
    yield_to: str = "user"

    @property
    def narrative_output(self) -> str:
        return "\n\n".join(segment["text"] for segment in self.segments)

    def to_output(self) -> dict[str, Any]:
        output: dict[str, Any] = {"segments": self.segments, "yield": self.yield_to, "narrativeOutput": self.narrative_output}
        if self.cues:
            output["cues"] = self.cues
        return output


def _split_long(text: str) -> list[str]:
    if len(text) <= MAX_SEGMENT_CHARS:
        return [text]
    parts: list[str] = []
    current = ""
    for line in text.split("\n"):
        while len(line) > MAX_SEGMENT_CHARS:
            if current:
                parts.append(current)
                current = ""
            parts.append(line[:MAX_SEGMENT_CHARS])
            line = line[MAX_SEGMENT_CHARS:]
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) > MAX_SEGMENT_CHARS:
            parts.append(current)
            current = line
        else:
            current = candidate
    if current:
        parts.append(current)
    return parts


def _clean_segment(raw: Any) -> dict[str, str] | None:
    if isinstance(raw, str):
        raw = {"kind": "narration", "text": raw}
    if not isinstance(raw, dict):
        return None
    text = raw.get("text")
    if not isinstance(text, str):
        return None
    # Blank lines inside a segment fold into one newline: one segment is one paragraph.
    text = re.sub(r"\n\s*\n+", "\n", text).strip()
    if not text:
        return None
    kind: str = raw["kind"] if raw.get("kind") in KINDS else "narration"
    segment = {"kind": kind, "text": text}
    speaker = raw.get("speaker")
    if kind != "narration" and isinstance(speaker, str) and speaker.strip():
        segment["speaker"] = speaker.strip()[:MAX_SPEAKER_CHARS]
    return segment


def _merge_to_limit(segments: list[dict[str, str]]) -> list[dict[str, str]]:
    if len(segments) <= MAX_SEGMENTS:
        return segments
    merged: list[dict[str, str]] = []
    for segment in segments:
        last = merged[-1] if merged else None
        if (
            last is not None
            and last["kind"] == segment["kind"]
            and last.get("speaker") == segment.get("speaker")
            and len(last["text"]) + len(segment["text"]) + 1 <= MAX_SEGMENT_CHARS
        ):
            last["text"] = f"{last['text']}\n{segment['text']}"
        else:
            merged.append(dict(segment))
    return merged[:MAX_SEGMENTS]


def normalize_story(reply: str | dict[str, Any]) -> Story:
    """Lenient rules: plain text is narration, unknown kinds are narration, long text splits, …"""
    data: Any = reply
    if isinstance(reply, str):
        stripped = reply.strip()
        try:
            data = json.loads(stripped) if stripped.startswith("{") else stripped
        except json.JSONDecodeError:
            data = stripped
    if isinstance(data, str):
        raw_segments: list[Any] = [part for part in re.split(r"\n\s*\n", data) if part.strip()]
        cues: Any = {}
        yield_to: Any = "user"
    elif isinstance(data, dict):
        listed = data.get("segments")
        raw_segments = listed if isinstance(listed, list) else []
        if not raw_segments and isinstance(data.get("text"), str):
            raw_segments = [data["text"]]
        cues = data.get("cues") if isinstance(data.get("cues"), dict) else {}
        yield_to = data.get("yield")
    else:
        raw_segments, cues, yield_to = [], {}, "user"
    segments: list[dict[str, str]] = []
    for raw in raw_segments:
        segment = _clean_segment(raw)
        if segment is None:
            continue
        segments.extend({**segment, "text": text} for text in _split_long(segment["text"]))
    segments = _merge_to_limit(_drop_trailing_options(segments))
    if not segments:
        raise EmptyStory("the story has no text")
    return Story(segments=segments, cues=_clean_cues(cues), yield_to="continue" if yield_to == "continue" else "user")


def _drop_trailing_options(segments: list[dict[str, str]]) -> list[dict[str, str]]:
    """Without the trailing narration that asks the player what to do: the question, and the option
    lists around it, which a blank line may have put in paragraphs of their own."""
    end = len(segments)
    cut = end
    index = end - 1
    while index >= 0 and segments[index]["kind"] == "narration":
        text = segments[index]["text"]
        if _OPTION_PROMPT.match(text):
            cut = index
        elif not _OPTION_LIST.match(text):
            break
        index -= 1
    if cut < end and index >= 0 and cut > index + 1:
        # Option lists written before the question belong to it too.
        cut = index + 1
    return segments[:cut]


def _clean_cues(raw: dict[str, Any]) -> dict[str, Any]:
    """cues within the contract's limits: long scene and mood are cut, names past 32 dropped,
    values of the wrong type and unknown keys left out."""
    cues: dict[str, Any] = {}
    scene, mood, present = raw.get("scene"), raw.get("mood"), raw.get("present")
    if isinstance(scene, str) and scene.strip():
        cues["scene"] = scene.strip()[:MAX_SCENE_CHARS]
    if isinstance(present, list):
        names = [name.strip()[:MAX_SPEAKER_CHARS] for name in present if isinstance(name, str) and name.strip()]
        if names:
            cues["present"] = list(dict.fromkeys(names))[:MAX_PRESENT]
    if isinstance(mood, str) and mood.strip():
        cues["mood"] = mood.strip()[:MAX_MOOD_CHARS]
    return cues


def story_problems(reply: str) -> list[str]:
    """What a segmented story reply got wrong, for the output-repair request (empty: fine)."""
    stripped = reply.strip()
    if not stripped:
        return ["the reply is empty"]
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        return ["the reply is plain text, not the JSON object with segments"]
    if not isinstance(data, dict):
        return ["the reply is not a JSON object"]
    segments = data.get("segments")
    if not isinstance(segments, list) or not segments:
        return ["segments is missing or empty"]
    problems = []
    for index, segment in enumerate(segments):
        if not isinstance(segment, dict):
            problems.append(f"segments[{index}] is not an object")
            continue
        if segment.get("kind") not in KINDS:
            problems.append(f"segments[{index}].kind {segment.get('kind')!r} is not narration, dialogue or action")
        if segment.get("kind") == "dialogue" and not segment.get("speaker"):
            problems.append(f"segments[{index}] is dialogue without a speaker")
        if not isinstance(segment.get("text"), str) or not segment.get("text", "").strip():
            problems.append(f"segments[{index}].text is empty")
    return problems

"""Stream only the story text out of a segmented JSON reply as it arrives.

The model writes narrative-engine@2 JSON (`{"segments": [{"kind", "speaker", "text"}]}`);
the player must see the segments' text, never JSON keys, with a blank line between
segments, the same text the committed story has. A reply that does not start with `{`
is plain prose and streams as it is.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from covel.common.v1 import common_pb2
from covel.scheduler.internal.v1 import turn_events_pb2
from services.scheduler.execution.runtime_scope import Emit

# Between two segments' text; always a piece of its own (clients start a segment after it).
PARAGRAPH_BREAK = "\n\n"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# Characters of a JSON string that need no state change: read as one run, not one by one (issue 19).
# Surrogates stay out of runs: one may pair with the next character.
_STRING_RUN = re.compile(r'[^"\\\ud800-\udfff]+')


@dataclass
class StreamedPiece:
    text: str
    # kind/speaker of the segment the text belongs to, as far as the model wrote them before its text.
    kind: str = ""
    speaker: str = ""
    # Withdraw everything streamed so far for this runtime (a draft sent back for correction).
    reset: bool = False


@dataclass
class _Frame:
    is_object: bool
    key: str | None = None
    expect_key: bool = False


@dataclass
class SegmentTextStream:
    _mode: str = "undecided"  # "json", "plain"
    _stack: list[_Frame] = field(default_factory=list)
    _in_string: bool = False
    _string_is_key: bool = False
    _escape: bool = False
    _unicode: str | None = None
    _buffer: list[str] = field(default_factory=list)
    _target: str = ""  # "text", "kind", "speaker", "key", "" (ignored)
    _segment: dict[str, str] = field(default_factory=dict)
    _texts_started: int = 0
    _pending_high_surrogate: str = ""

    def feed(self, chunk: str) -> list[StreamedPiece]:
        pieces: list[StreamedPiece] = []
        at = 0
        while at < len(chunk):
            if self._mode == "undecided":
                if chunk[at].isspace():
                    at += 1
                    continue
                self._mode = "json" if chunk[at] == "{" else "plain"
            if self._mode == "plain":
                pieces.append(StreamedPiece(chunk[at:]))
                break
            if self._in_string and not (self._escape or self._unicode is not None or self._pending_high_surrogate):
                run = _STRING_RUN.match(chunk, at)
                if run is not None:
                    self._string_run(run.group(), pieces)
                    at = run.end()
                    continue
            self._step(chunk[at], pieces)
            at += 1
        return _merge(pieces)

    # -- the JSON state machine --------------------------------------------------

    def _in_segment_object(self) -> bool:
        s = self._stack
        return len(s) == 3 and s[0].is_object and s[0].key == "segments" and not s[1].is_object and s[2].is_object

    def _emit(self, text: str, pieces: list[StreamedPiece]) -> None:
        pieces.append(StreamedPiece(text, self._segment.get("kind", ""), self._segment.get("speaker", "")))

    def _string_char(self, char: str, pieces: list[StreamedPiece]) -> None:
        if self._target == "text":
            if self._pending_high_surrogate:
                char = (self._pending_high_surrogate + char).encode("utf-16", "surrogatepass").decode("utf-16")
                self._pending_high_surrogate = ""
            elif "\ud800" <= char <= "\udbff":
                self._pending_high_surrogate = char
                return
            self._emit(char, pieces)
        elif self._target:
            self._buffer.append(char)

    def _string_run(self, text: str, pieces: list[StreamedPiece]) -> None:
        if self._target == "text":
            self._emit(text, pieces)
        elif self._target:
            self._buffer.append(text)

    def _step(self, char: str, pieces: list[StreamedPiece]) -> None:  # noqa: C901 -- a character-level JSON scanner: one state machine reads best as one function
        if self._in_string:
            if self._unicode is not None:
                self._unicode += char
                if len(self._unicode) == 4:
                    try:
                        decoded = chr(int(self._unicode, 16))
                    except ValueError:
                        decoded = ""
                    self._unicode = None
                    if decoded:
                        self._string_char(decoded, pieces)
                return
            if self._escape:
                self._escape = False
                if char == "u":
                    self._unicode = ""
                else:
                    self._string_char(_ESCAPES.get(char, char), pieces)
                return
            if char == "\\":
                self._escape = True
                return
            if char == '"':
                self._end_string()
                return
            self._string_char(char, pieces)
            return
        top = self._stack[-1] if self._stack else None
        if char == "{":
            self._stack.append(_Frame(is_object=True, expect_key=True))
            if self._in_segment_object():
                self._segment = {}
        elif char == "[":
            self._stack.append(_Frame(is_object=False))
        elif char in "}]":
            if self._stack:
                self._stack.pop()
        elif char == ":" and top is not None and top.is_object:
            top.expect_key = False
        elif char == "," and top is not None and top.is_object:
            top.expect_key = True
            top.key = None
        elif char == '"':
            self._begin_string(top, pieces)

    def _begin_string(self, top: _Frame | None, pieces: list[StreamedPiece]) -> None:
        self._in_string = True
        self._buffer = []
        if top is not None and top.is_object and top.expect_key:
            self._string_is_key = True
            self._target = "key"
            return
        self._string_is_key = False
        self._target = ""
        if self._in_segment_object() and top is not None and top.key in ("text", "kind", "speaker"):
            self._target = top.key
            if top.key == "text":
                if self._texts_started:
                    self._emit(PARAGRAPH_BREAK, pieces)
                self._texts_started += 1

    def _end_string(self) -> None:
        self._in_string = False
        value = "".join(self._buffer)
        if self._string_is_key and self._stack:
            self._stack[-1].key = value
        elif self._target in ("kind", "speaker"):
            self._segment[self._target] = value
        self._target = ""


def _merge(pieces: list[StreamedPiece]) -> list[StreamedPiece]:
    merged: list[StreamedPiece] = []
    for piece in pieces:
        if (merged and merged[-1].kind == piece.kind and merged[-1].speaker == piece.speaker
                and piece.text != PARAGRAPH_BREAK and merged[-1].text != PARAGRAPH_BREAK):
            merged[-1].text += piece.text
            continue
        merged.append(StreamedPiece(piece.text, piece.kind, piece.speaker))
    return merged


def narrative_deltas(runtime_id: str, emit: Emit) -> Callable[[StreamedPiece], Awaitable[None]]:
    """Streams a story agent's narrative as it comes, as narrative_delta events of the turn's stream."""

    async def on_narrative(piece: StreamedPiece) -> None:
        segment = common_pb2.Segment(kind=piece.kind, speaker=piece.speaker) if piece.kind else None
        await emit(turn_events_pb2.TurnEvent(narrative_delta=turn_events_pb2.NarrativeDelta(
            runtime_id=runtime_id, text=piece.text, segment=segment, reset=piece.reset)))

    return on_narrative

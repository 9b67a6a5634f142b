"""Canned replies for the scripted provider: per-slot queues and substring rules (COVEL_GATEWAY_SCRIPT).

    queues:
      story:                              # consumed one reply per attempt, in order
        - text: "The door creaks open."
        - json: {segments: [{kind: narration, text: "Rain."}]}   # sent as JSON text
        - tool_calls: [{name: roll_dice, arguments: {sides: 6}}]
        - text: "And then the"
          finish_reason: length           # stop | length | tool_calls | other | interrupted | error
        - error: {status: 503, message: overloaded}   # a failed attempt (429/5xx are retried)
        - text: "slow"
          delay_ms: 500                   # wait before the first chunk
    rules:                                # checked before the queues, first match wins
      - match: "look around"              # substring of the last user message (case-insensitive)
        slots: [story]                    # optional: only these slots
        reply: {text: "You see a lantern."}

A slot whose queue is empty (and no rule matches) is answered in automatic mode.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from services.gateway import events
from services.gateway.chat import ToolCall
from shared.bounded_yaml import load_yaml


class ScriptError(ValueError):
    pass


@dataclass(frozen=True)
class ScriptedError:
    status: int
    message: str


@dataclass(frozen=True)
class Reply:
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = events.STOP
    error_message: str = ""
    error: ScriptedError | None = None
    delay_ms: int = 0


@dataclass(frozen=True)
class Rule:
    match: str
    reply: Reply
    slots: tuple[str, ...] = ()

    def applies(self, slot: str, user_text: str) -> bool:
        if self.slots and slot not in self.slots:
            return False
        return self.match.lower() in user_text.lower()


def parse_reply(spec: Any, where: str) -> Reply:
    if isinstance(spec, str):
        return Reply(content=spec)
    if not isinstance(spec, dict):
        raise ScriptError(f"{where}: a reply is a string or a mapping")
    allowed = {"text", "json", "tool_calls", "finish_reason", "error_message", "error", "delay_ms"}
    if set(spec) - allowed:
        raise ScriptError(f"{where}: unknown keys {sorted(set(spec) - allowed)} (allowed: {sorted(allowed)})")
    content = str(spec.get("text") or "")
    if "json" in spec:
        content = json.dumps(spec["json"], ensure_ascii=False)
    calls = []
    for index, call in enumerate(spec.get("tool_calls") or []):
        if not isinstance(call, dict) or not call.get("name"):
            raise ScriptError(f"{where}.tool_calls[{index}]: needs a name")
        arguments = call.get("arguments", {})
        calls.append(
            ToolCall(
                id=str(call.get("id") or f"call_{index}"),
                name=str(call["name"]),
                arguments=arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False),
            )
        )
    finish = str(spec.get("finish_reason") or (events.TOOL_CALLS if calls else events.STOP))
    if finish not in events.FINISH_REASONS:
        raise ScriptError(f"{where}.finish_reason: one of {list(events.FINISH_REASONS)}, not {finish!r}")
    error = None
    if "error" in spec:
        raw = spec["error"] or {}
        if not isinstance(raw, dict) or not isinstance(raw.get("status", 503), int):
            raise ScriptError(f"{where}.error: a mapping with status (HTTP code) and message")
        error = ScriptedError(int(raw.get("status", 503)), str(raw.get("message") or "scripted failure"))
    return Reply(
        content=content,
        tool_calls=tuple(calls),
        finish_reason=finish,
        error_message=str(spec.get("error_message") or ""),
        error=error,
        delay_ms=int(spec.get("delay_ms") or 0),
    )


@dataclass
class Script:
    queues: dict[str, deque[Reply]] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def parse(cls, data: Any, where: str = "script") -> Script:
        if data is None:
            return cls()
        if not isinstance(data, dict) or set(data) - {"queues", "rules"}:
            raise ScriptError(f"{where}: expected a mapping with queues: and rules:")
        queues: dict[str, deque[Reply]] = {}
        for slot, replies in (data.get("queues") or {}).items():
            if not isinstance(replies, list):
                raise ScriptError(f"{where}: queues.{slot} must be a list of replies")
            queues[str(slot)] = deque(parse_reply(r, f"{where}: queues.{slot}[{i}]") for i, r in enumerate(replies))
        rules = []
        for index, rule in enumerate(data.get("rules") or []):
            at = f"{where}: rules[{index}]"
            if not isinstance(rule, dict) or not rule.get("match") or "reply" not in rule:
                raise ScriptError(f"{at}: needs match and reply")
            slots = rule.get("slots") or []
            rules.append(Rule(str(rule["match"]), parse_reply(rule["reply"], f"{at}.reply"), tuple(map(str, slots))))
        return cls(queues, rules)

    @classmethod
    def load(cls, path: Path) -> Script:
        try:
            data = load_yaml(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise ScriptError(f"COVEL_GATEWAY_SCRIPT={path}: cannot read the file ({error.strerror})") from None
        except yaml.YAMLError as error:
            raise ScriptError(f"COVEL_GATEWAY_SCRIPT={path}: not valid YAML ({error})") from None
        return cls.parse(data, str(path))

    def next_reply(self, slot: str, user_text: str) -> Reply | None:
        """A rule's reply, else the next queued reply of `slot`, else None (automatic mode)."""
        for rule in self.rules:
            if rule.applies(slot, user_text):
                return rule.reply
        with self._lock:
            queue = self.queues.get(slot)
            if queue:
                return queue.popleft()
        return None

    def replace(self, other: Script) -> None:
        with self._lock:
            self.queues = other.queues
            self.rules = other.rules

    def pending(self) -> dict[str, int]:
        with self._lock:
            return {slot: len(queue) for slot, queue in self.queues.items()}

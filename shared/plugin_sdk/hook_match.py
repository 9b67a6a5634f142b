"""A declarative `match` for a hook handler: field values the kernel can test before it sends an event.

`covel.on("PostRuntime", handler, match={"result.runtimeId": "dice-check/roller"})`: the handler runs
only for payloads whose `result.runtimeId` is that value. Each key is a dotted path into the payload,
or `ctx.plugin_id` / `ctx.runtime_id` / `ctx.locale` for the event's context; each value is a JSON
scalar, or a list of them (any of). Every key must match. A path that is missing matches only `None`.

Unlike a match function, the scheduler tests it itself (services/scheduler/hooks/bus.py): an event
that no handler in the session would accept costs no RPC and no sandbox round trip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CONTEXT_FIELDS = ("plugin_id", "runtime_id", "locale")
_SCALARS = (str, int, float, bool, type(None))
_MISSING = object()
MAX_CONDITIONS = 16
MAX_VALUES = 64


class MatchError(ValueError):
    """A declarative match that is not one (the message says which key and why)."""


@dataclass(frozen=True)
class Condition:
    path: str
    # The path's parts; a context field is ("ctx", field).
    parts: tuple[str, ...]
    accepted: tuple[Any, ...]

    def accepts(self, value: Any) -> bool:
        # Typed equality: True is not 1, 1 is 1.0 (a Struct carries every number as a float).
        is_bool = type(value) is bool
        return any(value == choice and is_bool == (type(choice) is bool) for choice in self.accepted)


@dataclass(frozen=True)
class DeclarativeMatch:
    conditions: tuple[Condition, ...]

    @classmethod
    def parse(cls, spec: Any) -> DeclarativeMatch:
        if not isinstance(spec, Mapping) or not spec:
            raise MatchError("a declarative match is a non-empty dict of {path: value or [values]}")
        if len(spec) > MAX_CONDITIONS:
            raise MatchError(f"a declarative match has at most {MAX_CONDITIONS} keys, not {len(spec)}")
        return cls(tuple(_condition(path, accepted) for path, accepted in spec.items()))

    def spec(self) -> dict[str, list[Any]]:
        """The match as plain data (what crosses to the sandbox host and the scheduler)."""
        return {condition.path: list(condition.accepted) for condition in self.conditions}

    def accepts(self, payload: Mapping[str, Any], context: Mapping[str, Any]) -> bool:
        """Whether the payload and the context fields (plugin_id, runtime_id, locale) match."""
        for condition in self.conditions:
            parts = condition.parts
            # An empty context field ("" on the wire) is a missing one.
            value = (context.get(parts[1]) or None) if parts[0] == "ctx" else _lookup(payload, parts)
            if not condition.accepts(value):
                return False
        return True


def _condition(path: Any, accepted: Any) -> Condition:
    if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
        raise MatchError(f"match key {path!r}: a dotted path into the payload such as result.runtimeId, or ctx.plugin_id")
    parts = tuple(path.split("."))
    if parts[0] == "ctx" and (len(parts) != 2 or parts[1] not in CONTEXT_FIELDS):
        raise MatchError(f"match key {path!r}: the context fields a match can test are "
                         + ", ".join(f"ctx.{name}" for name in CONTEXT_FIELDS))
    values = list(accepted) if isinstance(accepted, (list, tuple)) else [accepted]
    if not values or len(values) > MAX_VALUES:
        raise MatchError(f"match key {path!r}: give a value or a list of 1 to {MAX_VALUES} values")
    for value in values:
        if not isinstance(value, _SCALARS):
            raise MatchError(f"match key {path!r}: {type(value).__name__} is not a JSON scalar (string, number, bool or null)")
    return Condition(path, parts, tuple(values))


def _lookup(payload: Any, parts: tuple[str, ...]) -> Any:
    value = payload
    for part in parts:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part, _MISSING)
        if value is _MISSING:
            return None
    return value

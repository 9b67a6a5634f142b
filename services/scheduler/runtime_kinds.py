"""The closed sets of names a runtime is described by, as the manifest, the store and the wire spell them."""

from __future__ import annotations

from enum import StrEnum


class RuntimeType(StrEnum):
    AGENT = "agent"
    FUNCTION = "function"


class Visibility(StrEnum):
    # Its text is the turn's story (at most one story runtime a turn).
    STORY = "story"
    SYSTEM = "system"

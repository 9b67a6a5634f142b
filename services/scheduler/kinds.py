"""The closed sets of names the turn path builds and compares, as the manifest, the store and the wire spell them."""

from __future__ import annotations

from enum import StrEnum


class RuntimeType(StrEnum):
    AGENT = "agent"
    FUNCTION = "function"


class Visibility(StrEnum):
    # Its text is the turn's story (at most one story runtime a turn).
    STORY = "story"
    SYSTEM = "system"


class Stage(StrEnum):
    """schedule.stage: the stages of a turn, in the order they run."""

    SETUP = "setup"
    PRE_TURN = "pre-turn"
    NARRATIVE = "narrative"
    POST_TURN = "post-turn"
    AUDIT = "audit"


class TriggerType(StrEnum):
    """schedule.trigger.type: by its turn rules, only on request (RunManual), or following event topics."""

    AUTO = "auto"
    MANUAL = "manual"
    EVENT = "event"


class ActionSource(StrEnum):
    """A player action's source: the player's own, or one the kernel or a client adds (a continuation's advance)."""

    PLAYER = "player"
    SYSTEM = "system"


class ProposalType(StrEnum):
    """The proposals the scheduler builds or reads (the store applies them, by these names)."""

    NARRATIVE_APPEND = "narrative.append"
    EXPORT_RECORD = "export.record"
    EVENT_EMIT = "event.emit"
    PLUGIN_DATA = "plugin.data"
    PLUGIN_DATA_DELETE = "plugin.data.delete"
    PLUGIN_DATA_UPDATE = "plugin.data.update"
    CHARACTER_SCHEMA_SET = "character.schema.set"
    CHARACTER_UPSERT = "character.upsert"
    DIMENSION_INITIALIZE = "dimension.initialize"
    DIMENSION_UPDATE = "dimension.update"


class SessionPhase(StrEnum):
    """A session's phase: its setup runtimes still to finish, or play."""

    SETUP = "setup"
    PLAYING = "playing"

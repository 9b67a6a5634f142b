"""The lorebook's activation rules as a world author writes them (docs/worlds.md, "Lorebook" and "Import"):
`lorebook[].activation` per entry and `lorebookSettings` for the whole lorebook. The names follow SillyTavern
World Info, camelCased; a card's character book maps onto them (services/registry/importing/book_mapping.py).
The scheduler evaluates them each turn (services/scheduler/agent/lorebook_activation.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from services.registry.manifest_fields import Strict
from shared.lorebook_rules import ACTIVATION_DEFAULTS, SETTINGS_DEFAULTS

Key = Annotated[str, Field(min_length=1, max_length=100)]
Turns = Annotated[int, Field(ge=0, le=10_000)]
Depth = Annotated[int, Field(ge=0, le=1000)]
SelectiveLogic = Literal["andAny", "andAll", "notAny", "notAll"]
Position = Literal["beforeChar", "afterChar", "atDepth"]
Role = Literal["system", "user", "assistant"]


class LorebookActivation(Strict):
    """`lorebook[].activation`: when an entry comes up and where it goes."""

    secondaryKeys: list[Key] | None = Field(default=None, max_length=32)
    selectiveLogic: SelectiveLogic = ACTIVATION_DEFAULTS["selectiveLogic"]
    excludeKeys: list[Key] | None = Field(default=None, max_length=32)
    useRegex: bool = ACTIVATION_DEFAULTS["useRegex"]
    caseSensitive: bool = ACTIVATION_DEFAULTS["caseSensitive"]
    wholeWords: bool | None = None
    probability: Annotated[int, Field(ge=0, le=100)] = ACTIVATION_DEFAULTS["probability"]
    order: Annotated[int, Field(ge=-100_000, le=100_000)] = ACTIVATION_DEFAULTS["order"]
    position: Position = ACTIVATION_DEFAULTS["position"]
    depth: Depth = ACTIVATION_DEFAULTS["depth"]
    role: Role = ACTIVATION_DEFAULTS["role"]
    scanDepth: Depth | None = None
    excludeRecursion: bool = ACTIVATION_DEFAULTS["excludeRecursion"]
    preventRecursion: bool = ACTIVATION_DEFAULTS["preventRecursion"]
    delayUntilRecursion: bool = ACTIVATION_DEFAULTS["delayUntilRecursion"]
    sticky: Turns = ACTIVATION_DEFAULTS["sticky"]
    cooldown: Turns = ACTIVATION_DEFAULTS["cooldown"]
    delay: Turns = ACTIVATION_DEFAULTS["delay"]
    every: Turns = ACTIVATION_DEFAULTS["every"]
    once: bool = ACTIVATION_DEFAULTS["once"]
    group: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    groupWeight: Annotated[int, Field(ge=1, le=10_000)] = ACTIVATION_DEFAULTS["groupWeight"]
    groupOverride: bool = ACTIVATION_DEFAULTS["groupOverride"]


class LorebookSettings(Strict):
    """`lorebookSettings`: how the whole lorebook is scanned and how much of a prompt it may take."""

    scanDepth: Depth = SETTINGS_DEFAULTS["scanDepth"]
    tokenBudget: Annotated[int, Field(ge=1, le=100_000)] = SETTINGS_DEFAULTS["tokenBudget"]
    recursive: bool = SETTINGS_DEFAULTS["recursive"]
    maxRecursion: Annotated[int, Field(ge=0, le=10)] = SETTINGS_DEFAULTS["maxRecursion"]


class OpeningDecl(Strict):
    """`openings[]`: an opening a new session may pick (`opening` is the default one)."""

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
    text: Annotated[str, Field(min_length=1, max_length=20_000)]
    groupOnly: bool = False


def activation_dump(value: LorebookActivation | None) -> dict[str, Any]:
    """The fields an author set (defaults left out), as the world's lorebook holds them."""
    return value.model_dump(exclude_defaults=True, exclude_none=True) if value is not None else {}

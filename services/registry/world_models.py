"""Pydantic models of a world package as its author writes it: `world.yaml`, its characters
(inline or in a characters file) and the `world.<locale>.yaml` translations (docs/worlds.md).

Field names are the author's (camelCase), so a validation error's location is the path the
author wrote. Every group forbids unknown keys, like the plugin manifest's known groups; a
character also takes the fields its world's data sources name as `characterField`, which the
loader checks by name (world_loader.py).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from services.registry.manifest_fields import PLUGIN_ID, ContractId, HttpsLink, NonEmpty, Strict, either
from services.registry.manifest_models import Author
from services.registry.world_lorebook_models import LorebookActivation, LorebookSettings, OpeningDecl

WORLD_ID = PLUGIN_ID
# Characters, attributes and dimensions: readable ids (`npc-lin-yao`), not UUIDs the model cannot copy.
ITEM_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
CONTRACT_TARGET_PREFIX = "contract:"
PLAYER_TYPE = "player"
DEFAULT_CHARACTER_TYPE = "npc"
DEFAULT_CHARACTER_TYPES = (PLAYER_TYPE, DEFAULT_CHARACTER_TYPE)
AttributeType = Literal["string", "number", "integer", "boolean", "list"]


def _item_id(value: str) -> str:
    if not ITEM_ID.match(value):
        raise PydanticCustomError(
            "invalid-item-id",
            "`{value}` is not an id: letters, digits, `.`, `_`, `-`, starting with a letter or digit, at most 128",
            {"value": value[:80]},
        )
    return value


def _plugin_id(value: str) -> str:
    if not PLUGIN_ID.match(value):
        raise PydanticCustomError(
            "invalid-plugin-id", "`{value}` is not a plugin id (lowercase letters, digits, `.`, `_`, `-`; at most 64)",
            {"value": value[:80]},
        )
    return value


def _contract_target(value: str) -> str:
    if not value.startswith(CONTRACT_TARGET_PREFIX):
        raise PydanticCustomError(
            "invalid-data-target", "`{value}`: a data source goes `to: contract:<id>`, e.g. contract:example.facts@1",
            {"value": value[:80]},
        )
    from services.registry.manifest_fields import _contract_id

    _contract_id(value.removeprefix(CONTRACT_TARGET_PREFIX))
    return value


ItemId = Annotated[str, AfterValidator(_item_id)]
PluginId = Annotated[str, AfterValidator(_plugin_id)]
DataTarget = Annotated[str, AfterValidator(_contract_target)]
Name = Annotated[str, Field(min_length=1, max_length=120)]
Text = Annotated[str, Field(max_length=20_000)]


# ----- character schema and characters ----------------------------------------------------------


class AttributeDecl(Strict):
    """`characterSchema.attributes.<id>`: one attribute a character may have."""

    name: Name | None = None
    description: Text | None = None
    type: AttributeType = "string"
    min: int | float | None = None
    max: int | float | None = None
    options: Annotated[list[str | int | float], Field(min_length=1)] | None = None
    default: Any = None

    @model_validator(mode="after")
    def _bounds(self) -> AttributeDecl:
        if (self.min is not None or self.max is not None) and self.type not in ("number", "integer"):
            raise PydanticCustomError("invalid-value", "min and max are for number and integer attributes")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise PydanticCustomError("invalid-value", "min is greater than max")
        return self


class CharacterSchemaDecl(Strict):
    """`characterSchema`: the character types of the world and the attributes a character may have."""

    types: Annotated[list[ItemId], Field(min_length=1)] | None = None
    attributes: dict[ItemId, AttributeDecl] | None = None


class CharacterDecl(Strict):
    """One character of `characters` (or of the characters file). Other keys are allowed only
    when a data source names them as its `characterField` (checked by the loader)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, protected_namespaces=())

    id: ItemId
    name: Name
    type: ItemId = DEFAULT_CHARACTER_TYPE
    aliases: list[Name] | None = None
    description: Text | None = None
    personality: Text | None = None
    attributes: dict[ItemId, Any] | None = None


# ----- dimensions, plugin policy, data ----------------------------------------------------------


class DimensionDecl(Strict):
    """`dimensions.<id>`: a value of the world that changes in play (a mood, a clock, a threat)."""

    name: Name
    description: Text | None = None
    # A JSON Schema object, or the path of a JSON file of the package that holds one.
    schema_: NonEmpty | dict[str, Any] = Field(alias="schema")
    initial: Any = Field(...)


class PluginPolicy(Strict):
    preset: NonEmpty | None = None
    plus: list[PluginId] | None = None
    requires: list[ContractId] | None = None


class DataSourceFile(Strict):
    """`data[].source`: where in the package the records are, and how a file holds them."""

    kind: Literal["list", "map", "document"] | None = None
    path: NonEmpty
    key: NonEmpty | None = None


class DataSourceDecl(Strict):
    """`data[]`: content of the world for the plugins that accept a contract."""

    to: DataTarget
    source: DataSourceFile | None = None
    characterField: ItemId | None = None
    localeArrayKeys: Annotated[list[NonEmpty], Field(min_length=1)] | None = None
    visibility: Literal["public", "hidden"] = "public"

    @model_validator(mode="after")
    def _one_place(self) -> DataSourceDecl:
        if (self.source is None) == (self.characterField is None):
            raise PydanticCustomError(
                "data-source-place", "write exactly one of `source` (files of the package) and `characterField` (a field of each character)"
            )
        return self


# ----- world.yaml --------------------------------------------------------------------------------


class LorebookDecl(Strict):
    """`lorebook[]`: one entry of the world's lorebook (owner `world` in every session)."""

    id: ItemId
    title: Annotated[str, Field(max_length=200)] | None = None
    keys: list[Annotated[str, Field(min_length=1, max_length=100)]] | None = Field(default=None, max_length=32)
    content: Annotated[str, Field(min_length=1, max_length=8000)]
    constant: bool | None = None
    disabled: bool | None = None
    activation: LorebookActivation | None = None
    # What an import could not map from a card's entry, verbatim (its `extensions` but for the keys read into
    # `activation`, decorators the kernel does not read, ...); `covel export` gives it back.
    imported: dict[str, Any] | None = None


class MediaDecl(Strict):
    """`media[]`: a file of the package the world shows (an imported card's assets: icon, background, emotion ...)."""

    type: Annotated[str, Field(min_length=1, max_length=80)]
    name: Annotated[str, Field(min_length=1, max_length=80)]
    path: NonEmpty


class WorldManifest(Strict):
    """`world.yaml`."""

    id: NonEmpty | None = None
    name: Name
    description: Text | None = None
    version: NonEmpty | None = None
    opening: Annotated[str, Field(max_length=20_000)] | None = None
    openings: Annotated[list[OpeningDecl], Field(max_length=64)] | None = None
    # The characters inline, or the path of a YAML file of the package that lists them.
    characters: NonEmpty | list[Any] | None = None
    characterSchema: CharacterSchemaDecl | None = None
    dimensions: dict[ItemId, DimensionDecl] | None = None
    pluginPolicy: PluginPolicy | None = None
    pluginSettings: dict[PluginId, dict[str, Any]] | None = None
    data: list[DataSourceDecl] | None = None
    # The lorebook inline, or the path of a YAML file of the package that lists its entries.
    lorebook: NonEmpty | list[Any] | None = None
    lorebookSettings: LorebookSettings | None = None
    media: Annotated[list[MediaDecl], Field(max_length=256)] | None = None
    # What an import could not map, verbatim (covel export gives it back): {format, card, book}.
    imported: dict[str, Any] | None = None
    author: either(NonEmpty, str, Author) | None = None  # type: ignore[valid-type]
    license: Annotated[str, Field(max_length=64)] | None = None
    homepage: HttpsLink | None = None


# ----- world.<locale>.yaml -----------------------------------------------------------------------


class LinkLabel(Strict):
    label: Annotated[str, Field(min_length=1, max_length=40)]


class AuthorTranslation(Strict):
    about: Annotated[str, Field(max_length=500)] | None = None
    # By position: the n-th label translates the n-th of world.yaml's author.links.
    links: list[LinkLabel] | None = None


class NamedTranslation(Strict):
    name: Name | None = None
    description: Text | None = None


class CharacterTranslation(NamedTranslation):
    # Added to the character's aliases, so a name in this language resolves to the character.
    aliases: list[Name] | None = None


class SchemaTranslation(Strict):
    attributes: dict[ItemId, NamedTranslation] | None = None


class LorebookTranslation(Strict):
    title: Annotated[str, Field(max_length=200)] | None = None
    content: Annotated[str, Field(min_length=1, max_length=8000)] | None = None
    # Replace the entry's keys in this language (names as this language writes them).
    keys: list[Annotated[str, Field(min_length=1, max_length=100)]] | None = Field(default=None, max_length=32)


class WorldTranslation(Strict):
    """`world.<locale>.yaml`: the world's texts in another language, matched by id."""

    name: Name | None = None
    description: Text | None = None
    opening: Annotated[str, Field(max_length=20_000)] | None = None
    author: AuthorTranslation | None = None
    characters: dict[ItemId, CharacterTranslation] | None = None
    characterSchema: SchemaTranslation | None = None
    dimensions: dict[ItemId, NamedTranslation] | None = None
    lorebook: dict[ItemId, LorebookTranslation] | None = None


WORLD_FIELDS = frozenset(
    info.alias or name
    for model in (WorldManifest, CharacterSchemaDecl, AttributeDecl, CharacterDecl, DimensionDecl, PluginPolicy,
                  DataSourceDecl, DataSourceFile, Author, WorldTranslation, AuthorTranslation, CharacterTranslation, LorebookDecl,
                  LorebookTranslation, LorebookActivation, LorebookSettings, OpeningDecl, MediaDecl)
    for name, info in model.model_fields.items()
)

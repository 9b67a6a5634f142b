"""`authoring.references` of a receiving namespace, checked against a world before any session:
values in world data that name a character attribute or a world dimension (docs/worlds.md).

A reference declaration is `{path, to, type?, within?, values?}`:
- `path`: where the value is in each record: field names joined by `.`, `name[]` for each item
  of a list, `**` for any depth (`when.**.dimension`);
- `to: character-attribute`: the value is the id of a top-level attribute of characterSchema;
  `type` is the attribute type it must have; `within` names sibling number fields that must lie
  in the attribute's min..max;
- `to: world-dimension`: the value is the id of a dimension of the world; `within` names the
  sibling field that holds a place inside the dimension's value (`a.b` or a list of keys), which
  the dimension's schema must allow; `values` are paths (from the object holding the id) of
  candidate values, checked against the schema of that place (of the whole value without one).

A world without characterSchema is not checked for attributes, one without dimensions not for
dimensions: they are made at the start of play. A schema whose places cannot be worked out
(`$ref`, `anyOf`, …) reports no candidate errors, so a valid world is never refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from services.registry.diagnostics import DiagnosticBag, format_path
from services.registry.loaded_world import LoadedWorld
from shared import json_schemas

Path = tuple[str | int, ...]
UNKNOWN: Any = object()  # a place whose schema cannot be worked out


@dataclass(frozen=True)
class Record:
    """One record of world data: the file it is in, its location there, and its value."""

    file: str
    location: Path
    value: Any


def _segments(path: str) -> list[str]:
    return [segment for segment in path.split(".") if segment]


def matches(node: Any, segments: list[str], at: Path = ()) -> Iterator[tuple[dict[str, Any], Any, Path, Path]]:
    """(the object holding the field, the value, its path, the object's path) for every place `segments` reaches."""
    if not segments:
        return
    head, rest = segments[0], segments[1:]
    if head == "**":
        for descendant, where in _descendants(node, at):
            yield from matches(descendant, rest, where)
        return
    name, each = (head[:-2], True) if head.endswith("[]") else (head, False)
    if not isinstance(node, dict) or name not in node:
        return
    value = node[name]
    if each:
        items = list(enumerate(value)) if isinstance(value, list) else []
        places = [(item, (*at, name, index)) for index, item in items]
    else:
        places = [(value, (*at, name))]
    for item, where in places:
        if rest:
            yield from matches(item, rest, where)
        else:
            yield node, item, where, at


def _descendants(node: Any, at: Path) -> Iterator[tuple[Any, Path]]:
    yield node, at
    if isinstance(node, dict):
        for key, item in node.items():
            yield from _descendants(item, (*at, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _descendants(item, (*at, index))


def sub_schema(schema: Any, keys: list[str | int]) -> Any:
    """The schema of the place `keys` inside a value of `schema`: None when the schema does not
    allow that place, UNKNOWN when it cannot be worked out."""
    node = schema
    for key in keys:
        if not isinstance(node, dict) or any(word in node for word in ("$ref", "anyOf", "oneOf", "allOf", "if")):
            return UNKNOWN
        kind = node.get("type")
        properties = node.get("properties")
        if isinstance(properties, dict) and key in properties:
            node = properties[key]
            continue
        if kind == "array" and (isinstance(key, int) or str(key).isdigit()):
            node = node["items"] if isinstance(node.get("items"), dict) else UNKNOWN
            if node is UNKNOWN:
                return UNKNOWN
            continue
        additional = node.get("additionalProperties")
        if isinstance(additional, dict):
            node = additional
            continue
        if additional is False or (isinstance(kind, str) and kind not in ("object", "array")):
            return None
        return UNKNOWN
    return node


def _place(written: Any) -> list[str | int] | None:
    if isinstance(written, str):
        return [part for part in written.split(".") if part]
    if isinstance(written, list) and all(isinstance(part, str | int) for part in written):
        return list(written)
    return None


class ReferenceChecker:
    """Checks records against the reference declarations of the namespaces receiving them."""

    def __init__(self, world: LoadedWorld, bag: DiagnosticBag) -> None:
        self.world = world
        self.bag = bag
        schema = world.character_schema
        self.attributes: dict[str, dict[str, Any]] | None = schema["attributes"] if schema else None
        self.dimensions = {dimension.id: dimension for dimension in world.dimensions}

    def check(self, record: Record, references: list[dict[str, Any]], receiver: str) -> None:
        for reference in references:
            path = reference.get("path")
            if not isinstance(path, str):
                continue
            for parent, value, where, parent_at in matches(record.value, _segments(path)):
                at = (format_path((*record.location, *where)), (*record.location, *parent_at))
                if reference.get("to") == "character-attribute" and self.attributes is not None:
                    self._attribute(record, reference, parent, value, at, receiver)
                elif reference.get("to") == "world-dimension" and self.dimensions:
                    self._dimension(record, reference, parent, value, at, receiver)

    def error(self, code: str, record: Record, at: str, message: str, hint: str) -> None:
        self.bag.error(code, message, file=record.file, field_path=at, hint=hint)

    @staticmethod
    def _beside(parent_at: Path, *more: str | int) -> str:
        return format_path((*parent_at, *more))

    def _attribute(self, record: Record, reference: dict[str, Any], parent: dict[str, Any], value: Any,
                   places: tuple[str, Path], receiver: str) -> None:
        assert self.attributes is not None
        at, parent_at = places
        declared = self.attributes.get(value) if isinstance(value, str) else None
        if declared is None:
            self.error("attribute-reference", record, at, f"`{value}` is not an attribute of characterSchema ({receiver} reads it as one)",
                        f"use one of: {', '.join(self.attributes) or 'none declared'}, or declare it in characterSchema.attributes")
            return
        wanted = reference.get("type")
        kind = declared.get("type", "string")
        if isinstance(wanted, str) and kind != wanted and not (wanted == "number" and kind == "integer"):
            self.error("attribute-reference", record, at, f"attribute `{value}` is a {kind}; {receiver} needs a {wanted}",
                        f"point to a {wanted} attribute, or change the attribute's type")
        low, high = declared.get("min"), declared.get("max")
        for sibling in reference.get("within") or []:
            number = parent.get(sibling) if isinstance(sibling, str) else None
            if isinstance(number, int | float) and not isinstance(number, bool) and (
                    (low is not None and number < low) or (high is not None and number > high)):
                self.error("attribute-reference", record, self._beside(parent_at, sibling),
                            f"{number} is outside attribute `{value}`'s range {low if low is not None else '…'}..{high if high is not None else '…'}",
                            "use a value within the attribute's min and max")

    def _dimension(self, record: Record, reference: dict[str, Any], parent: dict[str, Any], value: Any,
                   places: tuple[str, Path], receiver: str) -> None:
        at, parent_at = places
        dimension = self.dimensions.get(value) if isinstance(value, str) else None
        if dimension is None:
            self.error("dimension-reference", record, at, f"`{value}` is not a dimension of this world ({receiver} reads it as one)",
                        f"use one of: {', '.join(self.dimensions)}, or declare it under dimensions")
            return
        schema: Any = dimension.schema
        within = [field for field in reference.get("within") or [] if isinstance(field, str)]
        # With `values`, `within` names one field (more is refused when the plugin loads: reference-within-ambiguous).
        for field in within:
            place = _place(parent.get(field)) if field in parent else None
            if not place:
                continue
            schema = sub_schema(dimension.schema, place)
            if schema is None:
                self.error("dimension-reference", record, self._beside(parent_at, field),
                            f"`{'.'.join(map(str, place))}` is not a place in dimension `{value}`'s value", "name a place its schema allows")
                return
        if schema is UNKNOWN:
            return
        validator = json_schemas.validator(schema)
        for values_path in reference.get("values") or []:
            if not isinstance(values_path, str):
                continue
            for _, candidate, where, _ in matches(parent, _segments(values_path)):
                errors = list(validator.iter_errors(candidate))
                if errors:
                    self.error("dimension-reference", record, self._beside(parent_at, *where),
                                f"{candidate!r} is not a value dimension `{value}` can take there: {errors[0].message}",
                                "use a value the dimension's schema allows")

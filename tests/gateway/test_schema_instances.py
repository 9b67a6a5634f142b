"""The scripted model's JSON Schema instance generator."""

from __future__ import annotations

import jsonschema
import pytest

from services.gateway.providers.scripted.schema_instances import generate_instance
from services.scheduler.contracts import kernel_contract_schema

SCHEMAS = {
    "object": {
        "type": "object",
        "required": ["name", "age", "tags", "kind"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "minLength": 3, "maxLength": 12},
            "age": {"type": "integer", "minimum": 18, "maximum": 30},
            "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 2, "maxItems": 3, "uniqueItems": True},
            "kind": {"const": "hero"},
            "nickname": {"type": ["string", "null"], "maxLength": 5},
            "active": {"type": "boolean"},
        },
    },
    "refs": {
        "$defs": {
            "point": {"type": "object", "required": ["x", "y"], "properties": {"x": {"type": "integer", "multipleOf": 5}, "y": {"type": "number"}}},
        },
        "type": "object",
        "required": ["points", "origin"],
        "properties": {
            "origin": {"$ref": "#/$defs/point"},
            "points": {"type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 3},
        },
    },
    "recursive": {
        "$defs": {
            "node": {
                "type": "object",
                "required": ["label"],
                "properties": {"label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "$ref": "#/$defs/node",
    },
    "any_one_of": {
        "type": "object",
        "required": ["value", "shape"],
        "properties": {
            "value": {"anyOf": [{"type": "integer", "minimum": 100}, {"type": "string", "format": "date"}]},
            "shape": {
                "oneOf": [
                    {"type": "object", "required": ["radius"], "properties": {"radius": {"type": "number", "minimum": 1}}, "additionalProperties": False},
                    {"type": "object", "required": ["side"], "properties": {"side": {"type": "integer"}}, "additionalProperties": False},
                ]
            },
        },
    },
    "all_of_and_email": {
        "allOf": [
            {"type": "object", "required": ["email"], "properties": {"email": {"type": "string", "format": "email"}}},
            {"required": ["id"], "properties": {"id": {"type": "string", "format": "uuid"}}},
        ]
    },
    "scalar": {"type": "string", "enum": ["left", "right"]},
    "narrative-engine@2": kernel_contract_schema("narrative-engine@2"),
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("seed", ["one", "two", "three"])
def test_instances_satisfy_the_schema(name: str, seed: str) -> None:
    schema = SCHEMAS[name]
    instance = generate_instance(schema, seed)
    jsonschema.validate(instance, schema)


def test_same_seed_same_instance() -> None:
    schema = SCHEMAS["object"]
    assert generate_instance(schema, "x") == generate_instance(schema, "x")
    assert len({repr(generate_instance(schema, str(i))) for i in range(10)}) > 1


@pytest.mark.parametrize(
    "pattern",
    [
        r"^[a-z]{3}-\d{2,4}$",
        r"^(npc|pc)_[A-Z][a-z]+$",
        r"^\w+@example\.(com|org)$",
        r"[^\s]+ ok",
        r"^#[0-9a-fA-F]{6}$",
        r"^(ab)+x*$",
        r"^id:\S+$",
    ],
)
def test_pattern_strings(pattern: str) -> None:
    schema = {"type": "object", "required": ["v"], "properties": {"v": {"type": "string", "pattern": pattern, "maxLength": 40}}}
    for seed in range(20):
        value = generate_instance(schema, seed)
        jsonschema.validate(value, schema)


def test_pattern_that_cannot_fit_its_length_is_reported() -> None:
    from services.gateway.providers.scripted.schema_instances import SchemaInstanceError

    with pytest.raises(SchemaInstanceError, match="pattern"):
        generate_instance({"type": "string", "pattern": "^a{10}$", "maxLength": 3}, 1)

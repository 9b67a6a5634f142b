"""A deterministic instance generator for JSON Schema (the scripted model's structured replies).

Covers what model-facing schemas use: type (also lists), properties/required,
additionalProperties, enum/const/default, items/prefixItems/minItems/maxItems/uniqueItems,
minLength/maxLength/format/pattern, minimum/maximum (exclusive too)/multipleOf, anyOf/oneOf/allOf,
and $ref into $defs/definitions. Candidates are checked with jsonschema (patterns on RE2), so a
branch that does not fit is skipped rather than returned.

Sizes are capped, so a schema cannot make the model build something huge: `minLength` and a
pattern's output at most MAX_STRING_CHARS, `minItems` / `minProperties` at most MAX_ITEMS, at
most MAX_DEPTH levels and MAX_VALUES values in all; over a cap is a SchemaInstanceError.
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any

from services.gateway.providers.scripted.pattern_strings import PatternTooLong, matching_string
from shared import json_schemas

WORDS = (
    "amber", "lantern", "river", "quiet", "harbor", "ember", "willow", "stone", "meadow", "silver",
    "echo", "north", "garden", "tide", "copper", "feather", "hollow", "bright", "mossy", "cinder",
)
FORMATS = {
    "date-time": "2024-05-01T12:00:00Z",
    "date": "2024-05-01",
    "time": "12:00:00Z",
    "email": "someone@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "hostname": "example.com",
    "ipv4": "127.0.0.1",
}
MAX_DEPTH = 40
MAX_STRING_CHARS = 10_000
MAX_ITEMS = 100
MAX_VALUES = 10_000
PATTERN_TRIES = 50
# Below this depth optional properties are left out and arrays get their minimum, so
# recursive schemas end.
SHALLOW_DEPTH = 6


class SchemaInstanceError(ValueError):
    """No instance could be built (e.g. contradictory constraints or an unresolvable $ref)."""


class InstanceGenerator:
    def __init__(self, schema: dict[str, Any], rng: random.Random) -> None:
        self.root = schema
        self.rng = rng
        self._validator = json_schemas.validator(schema)
        self._values = 0

    def valid(self, instance: Any, schema: Any) -> bool:
        try:
            return self._validator.evolve(schema=schema).is_valid(instance)
        except Exception:  # any failure (bad schema, unresolvable $ref) means "not a usable candidate"
            return False

    def _deref(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise SchemaInstanceError(f"only local $ref is supported, not {ref!r}")
        node: Any = self.root
        for part in ref.lstrip("#").strip("/").split("/") if ref not in ("#", "#/") else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit():
                node = node[int(part)]
            else:
                raise SchemaInstanceError(f"$ref {ref!r} does not resolve")
        return node

    def generate(self, schema: Any = None, depth: int = 0) -> Any:
        schema = self.root if schema is None else schema
        if schema is True or schema == {}:
            return self._word()
        if schema is False:
            raise SchemaInstanceError("false schema admits no instance")
        if depth > MAX_DEPTH:
            raise SchemaInstanceError(f"the schema nests deeper than {MAX_DEPTH} levels")
        self._values += 1
        if self._values > MAX_VALUES:
            raise SchemaInstanceError(f"the schema asks for more than {MAX_VALUES} values")
        if "$ref" in schema:
            target = self._deref(schema["$ref"])
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            merged = _merge(target, rest) if rest else target
            return self.generate(merged, depth + 1)
        if "const" in schema:
            return copy.deepcopy(schema["const"])
        if schema.get("enum"):
            return copy.deepcopy(self.rng.choice(schema["enum"]))
        if "allOf" in schema:
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged = _merge(merged, self._deref(part["$ref"]) if isinstance(part, dict) and "$ref" in part else part)
            return self.generate(merged, depth + 1)
        for key in ("oneOf", "anyOf"):
            if key in schema:
                return self._branch(schema, key, depth)
        if "default" in schema and self.valid(schema["default"], schema):
            return copy.deepcopy(schema["default"])
        kind = _kind(schema)
        return getattr(self, f"_{kind}")(schema, depth)

    def _branch(self, schema: dict[str, Any], key: str, depth: int) -> Any:
        rest = {k: v for k, v in schema.items() if k != key}
        branches = list(schema[key])
        start = self.rng.randrange(len(branches)) if branches else 0
        for offset in range(len(branches)):
            branch = branches[(start + offset) % len(branches)]
            if isinstance(branch, dict) and "$ref" in branch:
                branch = self._deref(branch["$ref"])
            candidate_schema = _merge(rest, branch) if isinstance(branch, dict) else branch
            try:
                candidate = self.generate(candidate_schema, depth + 1)
            except SchemaInstanceError:
                continue
            if self.valid(candidate, schema):
                return candidate
        raise SchemaInstanceError(f"no {key} branch could be satisfied")

    def _word(self) -> str:
        return self.rng.choice(WORDS)

    # ---- per type -------------------------------------------------------------------

    def _null(self, schema: dict[str, Any], depth: int) -> None:
        return None

    def _boolean(self, schema: dict[str, Any], depth: int) -> bool:
        return self.rng.random() < 0.5

    def _integer(self, schema: dict[str, Any], depth: int) -> int:
        low, high = _bounds(schema, integer=True)
        step = schema.get("multipleOf")
        if isinstance(step, int) and step > 0:
            first = math.ceil(low / step) * step
            if first > high:
                raise SchemaInstanceError("no multiple of multipleOf within the bounds")
            return first + step * self.rng.randrange(max(1, min(10, (high - first) // step + 1)))
        return self.rng.randint(low, max(low, min(high, low + 100)))

    def _number(self, schema: dict[str, Any], depth: int) -> float | int:
        if isinstance(schema.get("multipleOf"), int):
            return self._integer(schema, depth)
        low, high = _bounds(schema, integer=False)
        value = round(low + (min(high, low + 100) - low) * self.rng.random(), 2)
        return min(max(value, low), high)

    def _string(self, schema: dict[str, Any], depth: int) -> str:
        minimum = _size(schema, "minLength", 1, MAX_STRING_CHARS)
        maximum = int(min(_number_of(schema, "maxLength", max(minimum, 40)), MAX_STRING_CHARS))
        if maximum < minimum:
            raise SchemaInstanceError("maxLength is below minLength")
        if isinstance(schema.get("pattern"), str):
            return self._patterned(schema["pattern"], _size(schema, "minLength", 0, MAX_STRING_CHARS), maximum if "maxLength" in schema else MAX_STRING_CHARS)
        text = FORMATS.get(schema.get("format", ""), "")
        if not text or not (minimum <= len(text) <= maximum):
            words = [self._word() for _ in range(self.rng.randint(1, 4))]
            text = " ".join(words)
            while len(text) < minimum:
                text += " " + self._word()
            text = text[:maximum].rstrip() or text[:maximum]
            if len(text) < minimum:
                text = text.ljust(minimum, "a")
        return text

    def _patterned(self, pattern: str, minimum: int, maximum: int) -> str:
        problem = json_schemas.pattern_problem(pattern)
        if problem is not None:
            raise SchemaInstanceError(problem)
        shown = json_schemas.shown(pattern)
        for _ in range(PATTERN_TRIES):
            try:
                text = matching_string(pattern, self.rng, limit=MAX_STRING_CHARS)
            except PatternTooLong:
                raise SchemaInstanceError(f"pattern {shown} asks for strings over {MAX_STRING_CHARS} characters") from None
            except (ValueError, RecursionError) as error:  # syntax RE2 takes and Python's parser refuses (e.g. \p{L})
                raise SchemaInstanceError(f"the scripted model cannot write strings for pattern {shown} ({error})") from None
            if minimum <= len(text) <= maximum and json_schemas.search(pattern, text):
                return text
        raise SchemaInstanceError(f"no string of length {minimum}..{maximum} matching pattern {shown} was found")

    def _array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        minimum = _size(schema, "minItems", 0 if depth > SHALLOW_DEPTH else 1, MAX_ITEMS)
        maximum = int(min(_number_of(schema, "maxItems", max(minimum, 3)), MAX_ITEMS))
        if maximum < minimum:
            raise SchemaInstanceError("maxItems is below minItems")
        prefix = list(schema.get("prefixItems") or [])
        count = self.rng.randint(minimum, max(minimum, min(maximum, minimum + 2)))
        if depth > SHALLOW_DEPTH:
            count = minimum
        if schema.get("items") is False:
            count = min(count, len(prefix))
        items: list[Any] = []
        for index in range(count):
            item_schema = prefix[index] if index < len(prefix) else schema.get("items", {})
            item = None
            for _ in range(8 if schema.get("uniqueItems") else 1):
                item = self.generate(item_schema, depth + 1)
                if not schema.get("uniqueItems") or item not in items:
                    break
            if schema.get("uniqueItems") and item in items:
                if len(items) >= minimum:
                    break
                raise SchemaInstanceError("could not find enough distinct items for uniqueItems")
            items.append(item)
        return items

    def _object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties: dict[str, Any] = schema.get("properties") or {}
        required = list(schema.get("required") or [])
        result: dict[str, Any] = {}
        for name in [*required, *(p for p in properties if p not in required)]:
            if name in result:
                continue
            if name not in required and (depth > SHALLOW_DEPTH or (depth > 2 and self.rng.random() < 0.5)):
                continue
            subschema = properties.get(name, schema.get("additionalProperties", {}))
            if subschema is False:
                subschema = {}
            result[name] = self.generate(subschema, depth + 1)
        extra = schema.get("additionalProperties", {})
        while len(result) < _size(schema, "minProperties", 0, MAX_ITEMS) and extra is not False:
            result[f"{self._word()}_{len(result)}"] = self.generate(extra if isinstance(extra, dict) else {}, depth + 1)
        return result


def _number_of(schema: dict[str, Any], key: str, default: float) -> float:
    value = schema.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise SchemaInstanceError(f"{key} must be a non-negative number, not {json_schemas.shown(str(value))}")
    return value


def _size(schema: dict[str, Any], key: str, default: int, cap: int) -> int:
    """A size keyword (minLength, minItems, …) the model will meet, refused over `cap`."""
    value = _number_of(schema, key, default)
    if value > cap:
        raise SchemaInstanceError(f"{key} is {value:g}; the scripted model builds at most {cap}")
    return math.ceil(value)


def _kind(schema: dict[str, Any]) -> str:
    declared = schema.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if t != "null"), declared[0] if declared else None)
    if declared in ("null", "boolean", "integer", "number", "string", "array", "object"):
        return declared
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema or "minItems" in schema:
        return "array"
    if "minimum" in schema or "maximum" in schema:
        return "number"
    return "string"


def _bounds(schema: dict[str, Any], *, integer: bool) -> tuple[Any, Any]:
    low = schema.get("minimum", -math.inf)
    high = schema.get("maximum", math.inf)
    if "exclusiveMinimum" in schema and isinstance(schema["exclusiveMinimum"], (int, float)):
        low = max(low, schema["exclusiveMinimum"] + (1 if integer else 1e-6))
    if "exclusiveMaximum" in schema and isinstance(schema["exclusiveMaximum"], (int, float)):
        high = min(high, schema["exclusiveMaximum"] - (1 if integer else 1e-6))
    if low == -math.inf:
        low = min(0, high - 10) if high != math.inf else 0
    if high == math.inf:
        high = low + 100
    if integer:
        low, high = math.ceil(low), math.floor(high)
    if low > high:
        raise SchemaInstanceError("minimum is above maximum")
    return low, high


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if key == "properties" and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        elif key == "required" and isinstance(merged.get(key), list):
            merged[key] = list(dict.fromkeys([*merged[key], *value]))
        else:
            merged[key] = value
    return merged


def generate_instance(schema: dict[str, Any], seed: int | str) -> Any:
    """An instance of `schema`, the same for the same seed."""
    rng = random.Random(str(seed))
    generator = InstanceGenerator(schema, rng)
    instance = generator.generate()
    if not generator.valid(instance, schema):
        # One more try with other choices before giving up.
        for attempt in range(4):
            generator.rng = random.Random(f"{seed}/{attempt}")
            instance = generator.generate()
            if generator.valid(instance, schema):
                return instance
        raise SchemaInstanceError("the generated instance does not satisfy the schema")
    return instance

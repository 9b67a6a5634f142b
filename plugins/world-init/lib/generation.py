"""schema-gen's pure part: what the model is asked for, and the character schema and dimensions made of its answer."""

from __future__ import annotations

import re
from typing import Any

SLUG = "^[a-z][a-z0-9-]{1,30}$"
# What the model fills in (a JSON Schema; at least 15 attributes, as Covel's initialize-world asks).
GENERATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["attributes", "dimensions"],
    "additionalProperties": False,
    "properties": {
        "attributes": {"type": "array", "minItems": 15, "maxItems": 24, "items": {
            "type": "object", "required": ["id", "name", "description", "type"], "additionalProperties": False,
            "properties": {"id": {"type": "string", "pattern": SLUG}, "name": {"type": "string", "minLength": 1, "maxLength": 40},
                           "description": {"type": "string", "maxLength": 200}, "type": {"enum": ["text", "integer"]}}}},
        "dimensions": {"type": "array", "maxItems": 6, "items": {
            "type": "object", "required": ["id", "name", "description", "type", "initial"], "additionalProperties": False,
            "properties": {"id": {"type": "string", "pattern": SLUG}, "name": {"type": "string", "minLength": 1, "maxLength": 40},
                           "description": {"type": "string", "maxLength": 200}, "type": {"enum": ["text", "integer"]},
                           "initial": {"type": "string", "maxLength": 80}}}},
    },
}
MIN_ATTRIBUTES = 15
INTEGER_RANGE = (0, 10)

PROMPTS = {
    "en": ("You design the rules of a story world. Give the player characters' attributes (at least 15: traits, skills, "
           "standing, belongings worth tracking) and up to 6 world dimensions (values of the whole world that change as the "
           "story goes, such as a season, a war's front or a town's mood). Ids are short lowercase slugs. Integer attributes "
           "run from 0 to 10. A dimension's initial value is text, or a whole number for an integer dimension."),
    "zh": ("你在为一个故事世界设计规则。给出玩家角色的属性（至少 15 项：性格、技能、身份、值得记录的随身物品）和最多 6 个世界维度"
           "（随故事变化的整个世界的值，比如季节、战线或小镇的气氛）。id 用简短的小写英文短横线格式。整数属性取值 0 到 10。"
           "维度的初始值是文本，整数维度写一个整数。"),
}


def prompt(locale: str, characters: list[dict[str, Any]], dimensions: dict[str, Any]) -> str:
    lines = [PROMPTS.get(locale, PROMPTS["en"])]
    if characters:
        lines.append("Characters: " + "; ".join(f"{c.get('name') or c.get('id')}: {c.get('description', '')}" for c in characters[:12]))
    if dimensions:
        lines.append("Dimensions the world has already (do not repeat them): " + ", ".join(dimensions))
    return "\n".join(lines)


def character_schema(generated: dict[str, Any]) -> dict[str, Any]:
    """{types, attributes} for character.schema.set; the first attribute of a repeated id wins."""
    attributes: dict[str, Any] = {}
    for item in generated.get("attributes") or []:
        attribute_id = str(item.get("id") or "")
        if not re.match(SLUG, attribute_id) or attribute_id in attributes:
            continue
        attribute = {"name": str(item.get("name") or attribute_id), "description": str(item.get("description") or "")}
        if item.get("type") == "integer":
            attribute.update(type="integer", min=INTEGER_RANGE[0], max=INTEGER_RANGE[1])
        attributes[attribute_id] = attribute
    if len(attributes) < MIN_ATTRIBUTES:
        raise ValueError(f"the model gave {len(attributes)} usable attributes; at least {MIN_ATTRIBUTES} are needed")
    return {"types": ["player", "npc"], "attributes": attributes}


def new_dimensions(generated: dict[str, Any], existing: dict[str, Any]) -> list[dict[str, Any]]:
    """dimension.initialize items for the dimensions the world does not have yet."""
    made: dict[str, dict[str, Any]] = {}
    for item in generated.get("dimensions") or []:
        dimension_id = str(item.get("id") or "")
        if not re.match(SLUG, dimension_id) or dimension_id in existing or dimension_id in made:
            continue
        initial = str(item.get("initial") or "")
        if item.get("type") == "integer":
            schema: dict[str, Any] = {"type": "integer"}
            value: Any = int(initial) if re.fullmatch(r"-?\d{1,9}", initial.strip()) else 0
        else:
            schema, value = {"type": "string", "maxLength": 200}, initial
        made[dimension_id] = {"id": dimension_id, "name": str(item.get("name") or dimension_id),
                              "description": str(item.get("description") or ""), "schema": schema, "value": value}
    return list(made.values())

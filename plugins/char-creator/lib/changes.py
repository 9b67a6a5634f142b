"""character-tracker's pure part: what the model may change, and which of its changes hold."""

from __future__ import annotations

from typing import Any

PROMPTS = {
    "en": ("You track how the story changes the player's character. Player: {player}\nStory: {story}\n"
           "Character: {character}\nList only attributes this turn's story clearly changed, each with its new value "
           "and a short reason; an empty list when nothing changed."),
    "zh": ("你负责记录故事对玩家角色的改变。玩家：{player}\n故事：{story}\n角色：{character}\n"
           "只列出本轮故事明确改变的属性，写新值和简短理由；没有变化时给空列表。"),
}


def change_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": ["changes"], "additionalProperties": False, "properties": {"changes": {
        "type": "array", "maxItems": 5, "items": {
            "type": "object", "required": ["attribute", "value", "why"], "additionalProperties": False,
            "properties": {"attribute": {"enum": sorted(schema.get("attributes") or {}) or ["none"]},
                           "value": {"type": ["string", "integer"]}, "why": {"type": "string", "maxLength": 200}}}}}}


def valid_value(attribute: dict[str, Any], value: Any) -> bool:
    if attribute.get("type") == "integer":
        low, high = attribute.get("min"), attribute.get("max")
        return (isinstance(value, int) and not isinstance(value, bool) and (low is None or value >= low)
                and (high is None or value <= high))
    if attribute.get("options"):
        return value in attribute["options"]
    return isinstance(value, str) and 0 < len(value) <= 200


def held_changes(schema: dict[str, Any], character: dict[str, Any], changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The changes that name an attribute of the schema, fit it and differ from the current value (the first per attribute)."""
    attributes, current, held = schema.get("attributes") or {}, character.get("attributes") or {}, {}
    for change in changes:
        name = change.get("attribute")
        if name in attributes and name not in held and valid_value(attributes[name], change.get("value")) \
                and change.get("value") != current.get(name):
            held[name] = {"attribute": name, "value": change["value"], "why": str(change.get("why") or "")}
    return list(held.values())

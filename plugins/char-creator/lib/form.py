"""The character form: fields from the world's characterSchema, defaults from the world's preset player
character, and the answer written back into the character field by field."""

from __future__ import annotations

from typing import Any

FORM_ID = "protagonist"
# A form shows at most this many attributes (a generated schema has 15 or more; the rest keep their defaults).
FORM_ATTRIBUTES_MAX = 12
TITLES = {"en": ("Your character", "Who are you in this story?", "Name"),
          "zh": ("你的角色", "你在这个故事里是谁？", "名字")}


def attribute_field(attribute: dict[str, Any], default: Any) -> dict[str, Any]:
    field: dict[str, Any] = {"title": attribute.get("name") or "", "description": attribute.get("description") or ""}
    if attribute.get("type") == "integer":
        field["type"] = "integer"
        for bound, key in (("min", "minimum"), ("max", "maximum")):
            if isinstance(attribute.get(bound), int):
                field[key] = attribute[bound]
    elif attribute.get("options"):
        field["enum"] = list(attribute["options"])
    else:
        field.update(type="string", maxLength=200)
    if default is not None:
        field["default"] = default
    return field


def character_form(schema: dict[str, Any], preset: dict[str, Any] | None, locale: str) -> dict[str, Any]:
    """The form interaction (effects.interactions item) asking for the character."""
    title, prompt, name_label = TITLES.get(locale, TITLES["en"])
    defaults = (preset or {}).get("attributes") or {}
    # By id: a schema kept as a protobuf Struct has no key order of its own, and a form must not reshuffle.
    attributes = sorted((schema.get("attributes") or {}).items())[:FORM_ATTRIBUTES_MAX]
    properties: dict[str, Any] = {"name": {"type": "string", "minLength": 1, "maxLength": 60, "title": name_label}}
    if (preset or {}).get("name"):
        properties["name"]["default"] = preset["name"]
    for attribute_id, attribute in attributes:
        properties[attribute_id] = attribute_field(attribute, defaults.get(attribute_id))
    return {"kind": "form", "id": FORM_ID, "title": title, "prompt": prompt,
            "schema": {"type": "object", "required": ["name"], "additionalProperties": False, "properties": properties}}


def filled_character(preset: dict[str, Any] | None, values: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The preset (or a new player character) with each answered field written in: the name, then each attribute."""
    character = {key: value for key, value in (preset or {}).items() if key not in ("id", "version")}
    character.setdefault("type", "player")
    character["name"] = str(values["name"]).strip()
    attributes = dict(character.get("attributes") or {})
    for attribute_id in schema.get("attributes") or {}:
        if attribute_id in values:
            attributes[attribute_id] = values[attribute_id]
    character["attributes"] = attributes
    return character

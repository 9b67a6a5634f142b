"""A lorebook entry's activation rules and the lorebook's settings between their two forms: the world author's
camelCase dict (world.yaml `lorebook[].activation`, `lorebookSettings`; what the scheduler's evaluator reads) and
covel.common.v1.LorebookActivation / LorebookSettings on the wire. Only what differs from a default travels."""

from __future__ import annotations

from typing import Any

from covel.common.v1 import common_pb2

# Each rule's default: what an entry that does not write it gets (world_lorebook_models.py gives authors the same).
ACTIVATION_DEFAULTS: dict[str, Any] = {
    "secondaryKeys": [], "selectiveLogic": "andAny", "excludeKeys": [], "useRegex": False, "caseSensitive": False,
    "wholeWords": None, "probability": 100, "order": 100, "position": "beforeChar", "depth": 4, "role": "system",
    "scanDepth": None, "excludeRecursion": False, "preventRecursion": False, "delayUntilRecursion": False, "sticky": 0,
    "cooldown": 0, "delay": 0, "every": 0, "once": False, "group": "", "groupWeight": 100, "groupOverride": False,
}
SETTINGS_DEFAULTS: dict[str, Any] = {"scanDepth": 2, "tokenBudget": 1500, "recursive": True, "maxRecursion": 3}
# camelCase name -> (proto field, the presence flag of a field whose zero is not its default)
_FIELDS: dict[str, tuple[str, str]] = {
    "secondaryKeys": ("secondary_keys", ""), "selectiveLogic": ("selective_logic", ""), "excludeKeys": ("exclude_keys", ""),
    "useRegex": ("use_regex", ""), "caseSensitive": ("case_sensitive", ""), "probability": ("probability", "has_probability"),
    "order": ("order", "has_order"), "position": ("position", ""), "depth": ("depth", "has_depth"), "role": ("role", ""),
    "scanDepth": ("scan_depth", "has_scan_depth"), "excludeRecursion": ("exclude_recursion", ""),
    "preventRecursion": ("prevent_recursion", ""), "delayUntilRecursion": ("delay_until_recursion", ""), "sticky": ("sticky", ""),
    "cooldown": ("cooldown", ""), "delay": ("delay", ""), "every": ("every", ""), "once": ("once", ""), "group": ("group", ""),
    "groupWeight": ("group_weight", ""), "groupOverride": ("group_override", ""),
}
_SETTINGS = {"scanDepth": "scan_depth", "tokenBudget": "token_budget", "recursive": "recursive", "maxRecursion": "max_recursion"}


def activation_to_proto(rules: dict[str, Any] | None) -> common_pb2.LorebookActivation:
    message = common_pb2.LorebookActivation()
    for name, value in (rules or {}).items():
        if name == "wholeWords":
            message.whole_words = "" if value is None else "true" if value else "false"
            continue
        if name not in _FIELDS or value is None:
            continue
        field, flag = _FIELDS[name]
        if isinstance(value, list):
            getattr(message, field).extend(value)
        else:
            setattr(message, field, value)
        if flag:
            setattr(message, flag, True)
    return message


def activation_from_proto(message: common_pb2.LorebookActivation) -> dict[str, Any]:
    """The rules a message sets (its zero values and unset flags left out: the evaluator's defaults apply)."""
    rules: dict[str, Any] = {}
    for name, (field, flag) in _FIELDS.items():
        value = getattr(message, field)
        if flag:
            if getattr(message, flag):
                rules[name] = value
        elif value not in (0, "", False) and not (hasattr(value, "__len__") and not isinstance(value, str) and len(value) == 0):
            rules[name] = list(value) if not isinstance(value, int | str | bool) else value
    if message.whole_words:
        rules["wholeWords"] = message.whole_words == "true"
    return rules


def settings_to_proto(settings: dict[str, Any] | None) -> common_pb2.LorebookSettings | None:
    if not settings:
        return None
    return common_pb2.LorebookSettings(**{_SETTINGS[name]: value for name, value in settings.items() if name in _SETTINGS})


def settings_from_proto(message: common_pb2.LorebookSettings | None) -> dict[str, Any]:
    """Unset (None or an empty message): {} and the defaults apply."""
    if message is None or message.ByteSize() == 0:
        return {}
    return {name: getattr(message, field) for name, field in _SETTINGS.items()}


_CHOICES = {"selectiveLogic": ("andAny", "andAll", "notAny", "notAll"), "position": ("beforeChar", "afterChar", "atDepth"),
            "role": ("system", "user", "assistant")}
INTEGER_RULES = frozenset({"probability", "order", "depth", "scanDepth", "sticky", "cooldown", "delay", "every", "groupWeight"})
_BOUNDS = {"probability": (0, 100), "order": (-100_000, 100_000), "depth": (0, 1000), "scanDepth": (0, 1000), "sticky": (0, 10_000),
           "cooldown": (0, 10_000), "delay": (0, 10_000), "every": (0, 10_000), "groupWeight": (1, 10_000)}


def rules_problem(rules: Any) -> str:
    """What is wrong with activation rules written as JSON (a plugin's `lorebook.upsert`), "" when nothing: the same
    names, choices and bounds as world.yaml's `lorebook[].activation` (services/registry/world_lorebook_models.py)."""
    if not isinstance(rules, dict):
        return "activation must be an object of rules"
    for name, value in rules.items():
        where = f"activation.{name}"
        if name not in ACTIVATION_DEFAULTS:
            return f"{where} is not a rule (rules: {', '.join(ACTIVATION_DEFAULTS)})"
        if value is None:
            continue
        if name in _CHOICES and value not in _CHOICES[name]:
            return f"{where} must be one of {', '.join(_CHOICES[name])}"
        if name in _BOUNDS:
            low, high = _BOUNDS[name]
            if not isinstance(value, int | float) or isinstance(value, bool) or value != int(value) or not low <= value <= high:
                return f"{where} must be a whole number from {low} to {high}"
        if name in ("secondaryKeys", "excludeKeys") and not (
                isinstance(value, list) and len(value) <= 32 and all(isinstance(k, str) and 0 < len(k.strip()) <= 100 for k in value)):
            return f"{where} must be at most 32 keys of 1 to 100 characters"
        if name == "group" and not (isinstance(value, str) and len(value) <= 100):
            return f"{where} must be a name of at most 100 characters"
        if (isinstance(ACTIVATION_DEFAULTS[name], bool) or name == "wholeWords") and not isinstance(value, bool):
            return f"{where} must be true or false"
    return ""

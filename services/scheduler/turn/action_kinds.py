"""Action kinds: the six base kinds and the session's plugin kinds (`contributes.actionKinds`, on the wire
`<pluginId>/<name>`), as the catalogue clients read (ListActionKinds) and the rules each submitted
action is checked by (docs/worlds.md, "Action kinds").

Base kinds and the seat roles that may use them: say and act (a player, as a character), narrate and
direct (a director, as no character), advance and command (either). `do` is the old name of `act`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema.exceptions import SchemaError

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from services.scheduler.execution.dataset_policies import package_json
from services.scheduler.plugin_locale import labels
from services.scheduler.public_api import public_enum
from shared import json_schemas
from shared.manifest.composer import composer_can_show
from shared.structs import to_struct

ALIASES = {"do": "act"}


@dataclass(frozen=True)
class ActionKindRule:
    kind: str
    plugin_id: str
    roles: tuple[str, ...]
    text: str  # required | optional | none
    actor: bool
    schema: dict[str, Any] | None
    label: str
    icon: str = ""
    placeholder: str = ""

    @property
    def composer(self) -> bool:
        return self.schema is None or composer_can_show(self.schema)

    def validator(self) -> Any:
        return _validator(json.dumps(self.schema, sort_keys=True)) if self.schema is not None else None


# kind -> (roles, text, actor, {locale: label})
_BASE = {
    "say": (("player",), "required", True, {"en": "say", "zh": "说"}),
    "act": (("player",), "required", True, {"en": "act", "zh": "行动"}),
    "narrate": (("director",), "required", False, {"en": "narrate", "zh": "叙述"}),
    "direct": (("director",), "required", False, {"en": "direct", "zh": "指示"}),
    "advance": (("player", "director"), "optional", False, {"en": "advance", "zh": "推进"}),
    "command": (("player", "director"), "required", False, {"en": "command", "zh": "命令"}),
}
BASE_KINDS = tuple(_BASE)


def _language(locale: str) -> str:
    return "zh" if locale.startswith("zh") else "en"


def base_rules(locale: str) -> list[ActionKindRule]:
    return [ActionKindRule(kind, "", roles, text, actor, None, labels[_language(locale)])
            for kind, (roles, text, actor, labels) in _BASE.items()]


def plugin_rules(package: Any, locale: str) -> list[ActionKindRule]:
    """A running package's action kinds, labelled in the session's language (locales/<locale>.yaml)."""
    found = []
    translated = labels(package, locale)
    for index, kind in enumerate(package.contributes.action_kinds or []):
        display = kind.display
        where = f"contributes.actionKinds[{index}].display"
        label = translated.get(f"{where}.label") or (display.label if display and display.label else kind.name)
        placeholder = translated.get(f"{where}.placeholder") or (display.placeholder if display and display.placeholder else "")
        schema = package_json(package.root_dir, kind.schema_) if kind.schema_ else None
        if kind.schema_ and schema is None:
            schema = {"not": {}}  # a schema file that cannot be read now takes no fields at all (fail closed)
        found.append(ActionKindRule(kind.kind, package.id, tuple(kind.roles), kind.text, kind.actor, schema, label,
                                    (display.icon or "") if display else "", placeholder))
    return found


def session_catalogue(packages: Iterable[Any], locale: str) -> dict[str, ActionKindRule]:
    """kind -> its rule, for a session whose running packages are `packages`."""
    rules = base_rules(locale)
    for package in packages:
        rules.extend(plugin_rules(package, locale))
    return {rule.kind: rule for rule in rules}


def kind_to_proto(rule: ActionKindRule) -> scheduler_pb2.ActionKind:
    message = scheduler_pb2.ActionKind(kind=rule.kind, plugin_id=rule.plugin_id, roles=[public_enum(resources_pb2.SeatRole, role) for role in rule.roles],
                                       text=public_enum(resources_pb2.TextRule, rule.text),
                                       actor=rule.actor, label=rule.label, icon=rule.icon, placeholder=rule.placeholder,
                                       composer=rule.composer)
    if rule.schema is not None:
        message.fields_schema.CopyFrom(to_struct(rule.schema))
    return message


@lru_cache(maxsize=256)
def _validator(schema_text: str) -> Any:
    try:
        return json_schemas.checked_validator(json.loads(schema_text))
    except (SchemaError, json_schemas.PatternError):
        return json_schemas.checked_validator({"not": {}})

"""Plugin setting values against the packages' contributes.settings declarations."""

from __future__ import annotations

import grpc
import pytest

from services.scheduler.turn.setting_values import check_plugin_settings
from shared.errors import ServiceError
from shared.structs import to_struct
from tests.scheduler.compiled import compiled_package

DECLARED = [
    {"key": "person", "type": "select", "options": ["second", "third"], "default": "second"},
    {"key": "dc", "type": "integer", "min": 2, "max": 30, "default": 12},
    {"key": "start", "type": "text"},
    {"key": "loud", "type": "boolean", "default": False},
    {"key": "volume", "type": "slider", "min": 0, "max": 1},
    {"key": "floor", "type": "integer", "min": 0},
]
PACKAGES = {
    "demo": compiled_package("demo", package={"contributes": {"settings": DECLARED}}),
    "loose": compiled_package("loose", package={"description": "declares no settings"}),
}


def refused(settings: dict) -> tuple[str, str]:
    with pytest.raises(ServiceError) as raised:
        check_plugin_settings({plugin: to_struct(values) for plugin, values in settings.items()}, PACKAGES)
    error = raised.value
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    [violation] = error.violations
    return violation.field, violation.description


def test_valid_values_pass_and_struct_floats_count_as_integers() -> None:
    check_plugin_settings({"demo": to_struct({"person": "third", "dc": 11, "start": "Day 1", "loud": True, "volume": 0.5}),
                           "loose": to_struct({"anything": {"goes": [1]}}),
                           "framework": to_struct({"maxAutoAdvance": 2, "maxSubagentCalls": 64, "maxActors": 0})}, PACKAGES)


@pytest.mark.parametrize(("values", "field", "description"), [
    ({"person": "first"}, "plugin_settings.demo.person",
     "must be one of second, third, not 'first'; pick one of them or leave it out to use the default ('second')"),
    ({"dc": "hard"}, "plugin_settings.demo.dc",
     "must be a whole number, not 'hard'; send a whole number or leave it out to use the default (12)"),
    ({"dc": 11.5}, "plugin_settings.demo.dc",
     "must be a whole number, not 11.5; send a whole number or leave it out to use the default (12)"),
    ({"dc": 31}, "plugin_settings.demo.dc",
     "must be between 2 and 30, not 31; send a value in range or leave it out to use the default (12)"),
    ({"floor": -1}, "plugin_settings.demo.floor", "must be at least 0, not -1; send a value in range or leave it out"),
    ({"dc": True}, "plugin_settings.demo.dc",
     "must be a whole number, not true; send a whole number or leave it out to use the default (12)"),
    ({"start": 5}, "plugin_settings.demo.start", "must be a string, not 5; send text or leave it out"),
    ({"loud": "yes"}, "plugin_settings.demo.loud", "must be true or false, not 'yes'; leave it out to use the default (false)"),
    ({"volume": 2}, "plugin_settings.demo.volume", "must be between 0 and 1, not 2; send a value in range or leave it out"),
    ({"persn": "third"}, "plugin_settings.demo.persn",
     "plugin demo has no setting 'persn' (it declares: dc, floor, loud, person, start, volume); remove it or fix its name"),
])
def test_a_wrong_value_names_the_field_and_what_to_do(values, field, description) -> None:
    assert refused({"demo": values}) == (field, description)


def test_framework_settings_are_the_kernels() -> None:
    assert refused({"framework": {"maxActors": 17}}) == (
        "plugin_settings.framework.maxActors", "must be between 0 and 16, not 17; send a value in range or leave it out")
    field, description = refused({"framework": {"maxTurns": 3}})
    assert field == "plugin_settings.framework.maxTurns" and "has no setting 'maxTurns'" in description


def test_settings_of_a_plugin_that_is_not_installed() -> None:
    assert refused({"ghost": {"x": 1}}) == (
        "plugin_settings.ghost", "no plugin 'ghost' is installed; remove its settings, or install it and request it")

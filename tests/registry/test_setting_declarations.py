"""contributes.settings declarations: checked at load so that the player's values can be checked
against them at CreateSession (keys once, known types, options, min <= max, a valid default)."""

from __future__ import annotations

import pytest

from services.registry.diagnostics import Severity
from services.registry.loaded_package import PackageState
from services.registry.package_loader import load_package
from tests.registry.conftest import write_plugin

BASE = """
displayName: Settings
description: A package whose settings are checked.
contributes:
  settings:
"""


def load(tmp_path, settings: str):
    manifest = BASE + "\n".join("    " + line for line in settings.strip().splitlines())
    return load_package(write_plugin(tmp_path, "settings-case", manifest, "Do the work."), source="community")


def test_the_builtin_kinds_of_declaration_load(tmp_path) -> None:
    package = load(tmp_path, """
- {key: person, type: select, options: [second, third], default: second}
- {key: dc, type: integer, min: 2, max: 30, default: 12}
- {key: start, type: text, default: "Day 1"}
- {key: loud, type: boolean, default: false}
- {key: volume, type: slider, min: 0, max: 1, default: 0.5}
""")
    assert package.state is PackageState.LOADED, [str(d) for d in package.diagnostics]
    assert [d for d in package.diagnostics if d.code.endswith("setting") or "setting" in d.code] == []


@pytest.mark.parametrize(("settings", "code", "field_path", "message"), [
    ("- {key: dc, type: integer}\n- {key: dc, type: text}", "duplicate-setting", "contributes.settings[1]", "`dc` is declared twice"),
    ("- {key: person, type: select}", "invalid-setting", "contributes.settings[0].options", "select setting `person` lists no options"),
    ("- {key: dc, type: integer, min: 30, max: 2}", "invalid-setting", "contributes.settings[0].min", "min 30 above max 2"),
    ("- {key: dc, type: integer, min: 2, max: 30, default: 40}", "invalid-setting", "contributes.settings[0].default",
     "the default of setting `dc` must be between 2 and 30, not 40"),
    ("- {key: person, type: select, options: [second, third], default: first}", "invalid-setting",
     "contributes.settings[0].default", "the default of setting `person` must be one of second, third, not 'first'"),
])
def test_a_declaration_values_cannot_be_checked_against_fails_the_load(tmp_path, settings, code, field_path, message) -> None:
    package = load(tmp_path, settings)
    assert package.state is PackageState.FAILED
    [diagnostic] = [d for d in package.diagnostics if d.is_error]
    assert (diagnostic.code, diagnostic.field_path) == (code, field_path)
    assert message in diagnostic.message, diagnostic.message


def test_an_unknown_type_loads_with_a_warning(tmp_path) -> None:
    package = load(tmp_path, "- {key: hue, type: color}")
    assert package.state is PackageState.LOADED
    [warning] = [d for d in package.diagnostics if d.code == "unknown-setting-type"]
    assert warning.severity is Severity.WARNING and warning.field_path == "contributes.settings[0].type"

"""The range wording of a number setting's error (shared/plugin_settings.py): both bounds, only min, only max."""

from __future__ import annotations

import pytest

from shared.plugin_settings import value_problem


@pytest.mark.parametrize(
    ("declaration", "value", "expected"),
    [
        ({"type": "number", "min": 2, "max": 30}, 40, "must be between 2 and 30, not 40; send a value in range or leave it out"),
        ({"type": "slider", "min": 0.5}, 0, "must be at least 0.5, not 0; send a value in range or leave it out"),
        ({"type": "integer", "max": 3.0, "default": 1}, 4.0,
         "must be at most 3, not 4; send a value in range or leave it out to use the default (1)"),
        ({"type": "integer", "min": 1, "max": 3}, 2, ""),
    ],
)
def test_number_bounds_name_the_bounds_that_are_set(declaration, value, expected) -> None:
    assert value_problem(declaration, value) == expected

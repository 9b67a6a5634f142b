"""What every compiled-manifest model shares: frozen, strict, camelCase on the wire.

Attributes are snake_case for the code that reads them; the wire (and `to_json`) keeps the
spec's camelCase names. Unknown keys are errors, so a field the registry adds and no model
knows fails where it is compiled, not somewhere in the scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

Cardinality = Literal["one", "all"]


class ManifestError(ValueError):
    """A compiled manifest or definition that does not fit its model; the message names each field."""

    def __init__(self, what: str, error: ValidationError) -> None:
        self.problems = [f"{_location(item['loc']) or '(top)'}: {item['msg']}" for item in error.errors()]
        super().__init__(f"{what} does not fit its model: " + "; ".join(self.problems))


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in ("function-after", "function-before") or "[" in part:
            continue  # union and validator branches pydantic names in the location
        else:
            text += f".{part}" if text else part
    return text


class ManifestModel(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        populate_by_name=True,
        protected_namespaces=(),
    )

    @classmethod
    def parse(cls, data: Mapping[str, Any], what: str) -> Self:
        """`data` (the wire's JSON form) as this model; ManifestError naming every bad field."""
        try:
            return cls.model_validate(data, by_alias=True, by_name=False)
        except ValidationError as error:
            raise ManifestError(what, error) from None

    def to_json(self) -> dict[str, Any]:
        """The wire's JSON form: camelCase, only the keys that were given."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

"""Dataset rules at commit: allowed operation kinds and the record JSON Schema.

A dataset governs the namespace of its name for its own plugin only, matched on the namespace
as stored (`_hidden.notes` does not inherit `notes`). The policies come with the commit
request (CommitTurnRequest.datasets); the store reads no plugin folders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import SchemaError

from shared import json_schemas
from shared.plugin_data.operations import OPERATION_KINDS

MAX_RECORD_ERRORS = 3


class DatasetViolation(Exception):
    """A write the dataset's rules refuse (outcome code `dataset-violation`)."""


@dataclass
class Dataset:
    plugin_id: str
    namespace: str
    schema: dict[str, Any] | None
    ops: frozenset[str]
    _validator: Any = None

    def check_kinds(self, kinds: list[str]) -> None:
        for position, kind in enumerate(kinds):
            if kind not in self.ops:
                where = "" if len(kinds) == 1 else f" (operations[{position}])"
                raise DatasetViolation(
                    f"dataset {self.namespace}: operation {kind}{where} is not allowed; it allows {', '.join(sorted(self.ops))}"
                )

    def check_record(self, key: str, value: Any) -> None:
        validator = self._compiled()
        errors = sorted(validator.iter_errors(value), key=lambda error: list(error.absolute_path))
        if errors:
            shown = [f"{'/' + '/'.join(str(part) for part in error.absolute_path) if error.absolute_path else '(record)'}: {error.message}" for error in errors[:MAX_RECORD_ERRORS]]
            more = f" (and {len(errors) - MAX_RECORD_ERRORS} more)" if len(errors) > MAX_RECORD_ERRORS else ""
            raise DatasetViolation(f"dataset {self.namespace}: record {key!r} does not match the schema: {'; '.join(shown)}{more}")

    def _compiled(self) -> Any:
        if self.schema is None:
            raise DatasetViolation(f"dataset {self.namespace}: the host has no schema for it, so every write is rejected")
        if self._validator is None:
            if self.schema.get("$async"):
                raise DatasetViolation(f"dataset {self.namespace}: $async schemas are not supported; the write is rejected")
            try:
                self._validator = json_schemas.checked_validator(self.schema)
            except SchemaError as error:
                raise DatasetViolation(f"dataset {self.namespace}: its schema does not compile ({error.message}); the write is rejected") from None
        return self._validator


def dataset(plugin_id: str, namespace: str, schema: dict[str, Any] | None, ops: list[str]) -> Dataset:
    return Dataset(plugin_id, namespace, schema, frozenset(ops or OPERATION_KINDS))

"""JSON Schema validation whose regular expressions run on RE2 (linear time), wherever a schema
is evaluated: the store at commit, the scheduler's tool arguments and outputs, the hooks' tools,
the scripted model.

jsonschema evaluates `pattern` and `patternProperties` (also inside `additionalProperties`) with
Python's backtracking `re`, so a plugin's `^(a+)+$` against a 30-character string takes seconds,
and at commit the store holds its lock meanwhile. Here those keywords use google-re2, which has
no backreferences or lookarounds: a pattern that needs them is a validation error naming it.
`unevaluatedProperties` beside `patternProperties` is refused for the same reason (jsonschema's
implementation of it reads the patterns with `re`).

`validator` and `checked_validator` are cached per schema (by its JSON text, in its key order,
which orders the errors): a schema is compiled and checked against its metaschema once, not on
every call that validates with it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import re2
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is reported to the caller, not printed on stderr
PATTERN_SHOWN_CHARS = 60


class PatternError(ValueError):
    """RE2 cannot compile the pattern (unsupported syntax such as backreferences or lookarounds)."""


@functools.lru_cache(maxsize=2048)
def compiled_pattern(pattern: str) -> Any:
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as error:
        reason = error.args[0].decode("utf-8", "replace") if error.args and isinstance(error.args[0], bytes) else str(error)
        raise PatternError(
            f"the pattern {shown(pattern)} is not supported ({reason}); patterns run on RE2: "
            "no backreferences or lookarounds, and counted repeats nest to at most 1000"
        ) from None


def pattern_problem(pattern: str) -> str | None:
    """Why RE2 refuses `pattern`, or None when it compiles."""
    try:
        compiled_pattern(pattern)
    except PatternError as error:
        return str(error)
    return None


def search(pattern: str, text: str) -> bool:
    """JSON Schema's unanchored match; False for a pattern RE2 refuses."""
    try:
        return compiled_pattern(pattern).search(text) is not None
    except PatternError:
        return False


def shown(text: str) -> str:
    return repr(text) if len(text) <= PATTERN_SHOWN_CHARS else repr(text[:PATTERN_SHOWN_CHARS]) + "…"


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        regex = compiled_pattern(pattern)
    except PatternError as error:
        yield ValidationError(str(error))
        return
    if regex.search(instance) is None:
        yield ValidationError(f"{shown(instance)} does not match {shown(pattern)}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        try:
            regex = compiled_pattern(pattern)
        except PatternError as error:
            yield ValidationError(str(error))
            continue
        for key, value in instance.items():
            if regex.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [key for key in instance if key not in properties and not any(search(pattern, key) for pattern in patterns)]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        listed = ", ".join(shown(extra) for extra in sorted(extras)[:10])
        yield ValidationError(f"Additional properties are not allowed ({listed} {'was' if len(extras) == 1 else 'were'} unexpected)")


def _refused_unevaluated(validator: Any, unevaluated: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    yield ValidationError("unevaluatedProperties together with patternProperties is not supported; use additionalProperties")


def _mentions(node: Any, keyword: str) -> bool:
    if isinstance(node, dict):
        return keyword in node or any(_mentions(value, keyword) for value in node.values())
    if isinstance(node, list):
        return any(_mentions(item, keyword) for item in node)
    return False


@functools.cache
def _linear(base: type[Validator], *, refuse_unevaluated: bool) -> type[Validator]:
    replaced: dict[str, Any] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    if refuse_unevaluated:
        replaced["unevaluatedProperties"] = _refused_unevaluated
    # Only keywords the draft has: an older draft must not start reading unevaluatedProperties.
    return validators.extend(base, {key: value for key, value in replaced.items() if key in base.VALIDATORS})


def validator_class(schema: Any, *, draft_from_schema: bool = True) -> type[Validator]:
    """The schema's draft (its $schema, else 2020-12; always 2020-12 without draft_from_schema), with RE2 for its patterns."""
    base: type[Validator] = Draft202012Validator
    if draft_from_schema and isinstance(schema, dict):
        base = validators.validator_for(schema, default=Draft202012Validator)
    return _linear(base, refuse_unevaluated=_mentions(schema, "patternProperties"))


def validator(schema: Any, *, draft_from_schema: bool = True) -> Validator:
    """A validator for `schema` (not checked against its metaschema: see checked_validator)."""
    compiled, _problem = _compiled(schema, draft_from_schema, checked=False)
    assert compiled is not None
    return compiled


def checked_validator(schema: Any, *, draft_from_schema: bool = True) -> Validator:
    """A validator for `schema` after checking it against its draft's metaschema; SchemaError when it does not hold."""
    compiled, problem = _compiled(schema, draft_from_schema, checked=True)
    if compiled is None:
        raise SchemaError(problem)
    return compiled


COMPILED_CACHE_SIZE = 1024


def _compiled(schema: Any, draft_from_schema: bool, *, checked: bool) -> tuple[Validator | None, str]:
    try:
        text = json.dumps(schema, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return _compile(schema, draft_from_schema, checked)  # not JSON: nothing to key it by
    return _compiled_text(text, draft_from_schema, checked)


@functools.lru_cache(maxsize=COMPILED_CACHE_SIZE)
def _compiled_text(text: str, draft_from_schema: bool, checked: bool) -> tuple[Validator | None, str]:
    # Compiled from a copy of its own, so a caller changing its schema later changes nothing here.
    return _compile(json.loads(text), draft_from_schema, checked)


def _compile(schema: Any, draft_from_schema: bool, checked: bool) -> tuple[Validator | None, str]:
    kind = validator_class(schema, draft_from_schema=draft_from_schema)
    if checked:
        try:
            kind.check_schema(schema)
        except SchemaError as error:
            return None, error.message
    return kind(schema), ""

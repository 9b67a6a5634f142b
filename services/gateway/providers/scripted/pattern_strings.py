"""Strings that match a regular expression (JSON Schema `pattern`), for the scripted model.

A small walker over Python's own regex parse tree: literals, classes (ranges, \\d \\w \\s,
negation), alternation, groups and back-references, repeats (open-ended ones kept short),
anchors. Lookarounds are skipped; the caller checks the candidate (on RE2, shared/json_schemas).
Output past `limit` characters stops the walk (PatternTooLong): `(a{1000}){1000}` is a short pattern.
"""

from __future__ import annotations

import random
import string

# Python 3.11+ (requires-python); the old sre_* modules are deprecated aliases of these.
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

# How far past its minimum an open-ended repeat (*, +, {n,}) may go.
OPEN_REPEAT_EXTRA = 3
PRINTABLE = string.ascii_letters + string.digits + " -_.,"
CATEGORIES = {
    sre_constants.CATEGORY_DIGIT: string.digits,
    sre_constants.CATEGORY_NOT_DIGIT: string.ascii_letters + " -_",
    sre_constants.CATEGORY_WORD: string.ascii_letters + string.digits + "_",
    sre_constants.CATEGORY_NOT_WORD: " -.,!?",
    sre_constants.CATEGORY_SPACE: " ",
    sre_constants.CATEGORY_NOT_SPACE: string.ascii_letters + string.digits,
}


class PatternTooLong(ValueError):
    """The pattern's strings are longer than the walk's limit."""


class _Walker:
    def __init__(self, rng: random.Random, limit: int) -> None:
        self.rng = rng
        self.groups: dict[int, str] = {}
        self.limit = limit
        self.produced = 0

    def sequence(self, items: list) -> str:
        return "".join(self.item(op, arg) for op, arg in items)

    def item(self, op: Any, arg: Any) -> str:
        text = self._item(op, arg)
        self.produced += len(text)
        if self.produced > self.limit:
            raise PatternTooLong(f"over {self.limit} characters")
        return text

    def _item(self, op: Any, arg: Any) -> str:  # op, arg: parse-tree nodes (private re module, untyped)
        if op is sre_constants.LITERAL:
            return chr(arg)
        if op is sre_constants.NOT_LITERAL:
            return self.rng.choice([c for c in PRINTABLE if ord(c) != arg])
        if op is sre_constants.ANY:
            return self.rng.choice(string.ascii_letters)
        if op is sre_constants.IN:
            return self.rng.choice(self.members(arg))
        if op is sre_constants.BRANCH:
            return self.sequence(list(self.rng.choice(arg[1])))
        if op is sre_constants.SUBPATTERN:
            group, _add, _del, body = arg
            text = self.sequence(list(body))
            if group is not None:
                self.groups[group] = text
            return text
        if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, getattr(sre_constants, "POSSESSIVE_REPEAT", None)):
            low, high, body = arg
            top = low + OPEN_REPEAT_EXTRA if high is sre_constants.MAXREPEAT else high
            if low > self.limit:
                raise PatternTooLong(f"a repeat of at least {low}")
            return "".join(self.sequence(list(body)) for _ in range(self.rng.randint(low, max(low, min(top, low + self.limit)))))
        if op is sre_constants.GROUPREF:
            return self.groups.get(arg, "")
        if op is sre_constants.CATEGORY:
            return self.rng.choice(CATEGORIES.get(arg, string.ascii_letters))
        # AT (anchors), ASSERT / ASSERT_NOT (lookarounds) produce no text.
        return ""

    def members(self, items: list) -> list[str]:
        negate = bool(items) and items[0][0] is sre_constants.NEGATE
        chosen: set[str] = set()
        for op, arg in items[1:] if negate else items:
            if op is sre_constants.LITERAL:
                chosen.add(chr(arg))
            elif op is sre_constants.RANGE:
                low, high = arg
                chosen.update(chr(c) for c in range(low, min(high, low + 200) + 1))
            elif op is sre_constants.CATEGORY:
                chosen.update(CATEGORIES.get(arg, ""))
        if negate:
            return [c for c in PRINTABLE if c not in chosen] or ["~"]
        return sorted(chosen) or ["a"]


def matching_string(pattern: str, rng: random.Random, *, limit: int) -> str:
    """One string the pattern matches in full (so also under JSON Schema's unanchored search).
    ValueError (re.error) for syntax Python's parser refuses; PatternTooLong past `limit` characters."""
    return _Walker(rng, limit).sequence(list(sre_parse.parse(pattern)))

"""The macros of character cards in a text that reaches a prompt (a lorebook entry, an opening): `{{char}}`,
`{{user}}`, `{{random:a,b,...}}`, `{{pick:a,b,...}}`, `{{roll:N}}` (or `{{roll:dN}}`), `{{// comment}}`.
Draws come from the caller's generator (the session's seeded random), so a seed repeats them; an unknown macro
stays as written."""

from __future__ import annotations

import re
from collections.abc import Callable

MACRO = re.compile(r"\{\{\s*(?://[^}]*|(?P<name>[a-zA-Z_]+)\s*(?::(?P<argument>[^}]*))?)\s*\}\}")
ROLL_MAX = 1_000_000


def expand(text: str, char: str, user: str, draw: Callable[[], float]) -> str:
    """`text` with its macros replaced; `draw()` gives a number in [0, 1)."""
    if "{{" not in text:
        return text

    def one(found: re.Match[str]) -> str:
        name = (found.group("name") or "").lower()
        argument = found.group("argument") or ""
        if not name:
            return ""  # {{// a comment}}
        if name == "char":
            return char
        if name == "user":
            return user
        if name in ("random", "pick") and argument:
            choices = [choice.strip() for choice in argument.split(",")]
            return choices[int(draw() * len(choices)) % len(choices)]
        if name == "roll":
            sides = argument.strip().lower().removeprefix("d")
            if sides.isdigit() and 0 < int(sides) <= ROLL_MAX:
                return str(1 + int(draw() * int(sides)))
        return found.group(0)

    return MACRO.sub(one, text)

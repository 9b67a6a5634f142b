"""How a lorebook key matches a text (docs/worlds.md, "Lorebook"): the same for the registry (a world's regex
keys are checked when it loads) and the scheduler (keys matched each turn).

A key written `/pattern/flags` is a regular expression, and with `useRegex` every key is; patterns run on RE2
(google-re2: linear time, a bounded memory); a `/pattern/` key's case is its flags' (`i` ignores it), a
`useRegex` key's is `caseSensitive`'s. A plain key matches case-insensitively unless
`caseSensitive`; `wholeWords` true matches whole words only, false anywhere, unset whole words where the key is in
spaced script (ASCII words) and anywhere in Chinese or Japanese text."""

from __future__ import annotations

import functools
import re
from typing import Any

import re2

REGEX_KEY = re.compile(r"^/(?P<pattern>.+)/(?P<flags>[a-z]*)$", re.DOTALL)
_OPTIONS_MEMORY = 1 << 20


class BadKey(ValueError):
    pass


@functools.lru_cache(maxsize=4096)
def compiled(pattern: str, ignore_case: bool) -> Any:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.max_mem = _OPTIONS_MEMORY
    options.log_errors = False
    try:
        return re2.compile(pattern, options=options)
    except re2.error as error:
        raise BadKey(f"`{pattern[:80]}` is not an RE2 pattern ({error})") from None


def regex_of(key: str, use_regex: bool, case_sensitive: bool) -> Any | None:
    """The compiled pattern of a regex key (None for a plain one); BadKey for a pattern RE2 refuses."""
    written = REGEX_KEY.match(key)
    if written:
        return compiled(written.group("pattern"), "i" in written.group("flags"))
    return compiled(key, not case_sensitive) if use_regex else None


def key_position(key: str, text: str, *, use_regex: bool = False, case_sensitive: bool = False, whole_words: bool | None = None) -> int:
    """Where `key` first matches in `text`, or -1 (also for a pattern RE2 refuses: the writes check them, this is the net)."""
    try:
        pattern = regex_of(key, use_regex, case_sensitive)
    except BadKey:
        return -1
    if pattern is not None:
        found = pattern.search(text)
        return found.start() if found else -1
    needle = key.strip() if case_sensitive else key.strip().casefold()
    if not needle:
        return -1
    haystack = text if case_sensitive else _folded(text)
    start = haystack.find(needle)  # a plain search first: most keys are nowhere in the text
    if start < 0:
        return -1
    words = whole_words if whole_words is not None else (needle.isascii() and _WORD.search(needle) is not None)
    if words:
        found_word = _whole_word(needle).search(haystack, start)
        return found_word.start() if found_word else -1
    return start


_WORD = re.compile(r"\w")


@functools.lru_cache(maxsize=8)
def _folded(text: str) -> str:
    """The text casefolded once for all the keys matched against it (a turn scans a few texts many times)."""
    return text.casefold()


@functools.lru_cache(maxsize=8192)
def _whole_word(needle: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(needle)}(?!\w)")

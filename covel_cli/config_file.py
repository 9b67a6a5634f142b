"""The config file every settings class reads (shared/settings.py config_file(): `COVEL_CONFIG_FILE`, default
`covel.env` in the working directory): KEY=VALUE lines in dotenv format, read with python-dotenv as
pydantic-settings reads them, and rewritten by `covel onboard` (covel_cli/onboard.py).

A rewrite keeps every line it does not change (comments, blank lines, other keys) in place, changes the
lines of a key in place, and adds new keys at the end. It is atomic (a temporary file in the same folder,
then a rename) and leaves the file at mode 0600: it may hold an API token.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from dotenv import dotenv_values

FILE_MODE = 0o600
# A line that sets a key: `KEY=…` or `export KEY=…` (python-dotenv's own syntax).
ASSIGNMENT = re.compile(r"^(\s*(?:export\s+)?)([A-Za-z_][A-Za-z0-9_.]*)\s*=")
# Values written bare; any other single-quoted, else double-quoted (python-dotenv expands ${…} in every form).
BARE = re.compile(r"^[A-Za-z0-9_./:@,+-]*$")
SECRET_NAME = re.compile(r"(_KEY|_TOKEN|_SECRET|PASSWORD)$", re.IGNORECASE)


class Unwritable(ValueError):
    """A value the file cannot hold so that it reads back the same."""


def read_config(path: Path) -> dict[str, str]:
    """The file's settings (a missing file: none), as pydantic-settings reads them."""
    if not path.is_file():
        return {}
    return {key: value for key, value in dotenv_values(path, encoding="utf-8").items() if value is not None}


def shown(key: str, value: str) -> str:
    """`value` as printed: *** for a key that names a secret (…_KEY, …_TOKEN, …_SECRET, …PASSWORD)."""
    return "***" if SECRET_NAME.search(key) else value


def assignment(key: str, value: str) -> str:
    """One `KEY=value` line that reads back as `value` (Unwritable when none does)."""
    if "\n" in value or "\r" in value or "\0" in value:
        raise Unwritable("a value on one line, without NUL characters")
    if BARE.match(value):
        line = f"{key}={value}"
    elif "'" not in value:
        line = f"{key}='{value}'"
    else:
        line = '{}="{}"'.format(key, value.replace("\\", "\\\\").replace('"', '\\"'))
    if dotenv_values(stream=io.StringIO(line + "\n")).get(key) != value:
        raise Unwritable("a value that reads back the same in dotenv format (no ${…}: it would be expanded)")
    return line


def rewritten(text: str, changes: Mapping[str, str], added_by: Mapping[str, str]) -> str:
    """The file's text with `changes` applied: a key's lines changed in place, new keys appended (under a
    comment naming who added them, `added_by[key]`)."""
    lines = text.splitlines()
    seen: set[str] = set()
    for index, line in enumerate(lines):
        found = ASSIGNMENT.match(line)
        if found and found.group(2) in changes:
            seen.add(found.group(2))
            lines[index] = found.group(1) + assignment(found.group(2), changes[found.group(2)])
    added: dict[str, list[str]] = {}
    for key, value in changes.items():
        if key not in seen:
            added.setdefault(added_by.get(key, ""), []).append(assignment(key, value))
    for source, assignments in added.items():
        lines += [f"# added by covel onboard{f' ({source})' if source else ''}", *assignments]
    return "\n".join(lines) + "\n"


def write_config(path: Path, changes: Mapping[str, str], added_by: Mapping[str, str]) -> None:
    """Apply `changes` to the file atomically (created when missing), mode 0600."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    content = rewritten(text, changes, added_by)
    folder = path.resolve().parent
    folder.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        os.fchmod(descriptor, FILE_MODE)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

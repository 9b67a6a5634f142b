"""A provider's API key out of text the provider sent back, in whatever form it echoed it.

Providers quote the key they were sent in error bodies ("Incorrect API key provided: sk-…"), and
not always verbatim: split by a line break or spaces, lowercased, or cut to its first characters.
So the text is compared with the key ignoring case and whitespace, and every stretch that shares
FRAGMENT_CHARS (10) consecutive characters with the key is replaced, which also catches a cut key.
"""

from __future__ import annotations

REDACTED = "[redacted]"
# Longer than vendor prefixes ("sk-live-", "sk-proj-"), short enough that a key cut to its start is caught.
FRAGMENT_CHARS = 10


def redact_secret(text: str, secret: str | None) -> str:
    """`text` with every echo of `secret` (whole, split, re-cased or cut) replaced by REDACTED."""
    squeezed_secret = "".join(secret.split()).casefold() if secret else ""
    if not squeezed_secret:
        return text
    size = min(FRAGMENT_CHARS, len(squeezed_secret))
    fragments = {squeezed_secret[at : at + size] for at in range(len(squeezed_secret) - size + 1)}
    # The text without whitespace, and where each of its characters came from.
    positions = [index for index, char in enumerate(text) if not char.isspace()]
    squeezed = "".join(text[index] for index in positions).casefold()
    if len(squeezed) != len(positions):  # casefold changed a length (ß → ss): compare per character instead
        squeezed = "".join(text[index].lower() for index in positions)
    covered = [False] * len(text)
    for at in range(len(squeezed) - size + 1):
        if squeezed[at : at + size] in fragments:
            for index in range(positions[at], positions[at + size - 1] + 1):
                covered[index] = True
    return _replace_covered(text, covered)


def _replace_covered(text: str, covered: list[bool]) -> str:
    pieces: list[str] = []
    index = 0
    while index < len(text):
        if not covered[index]:
            pieces.append(text[index])
            index += 1
            continue
        while index < len(text) and covered[index]:
            index += 1
        pieces.append(REDACTED)
    return "".join(pieces)

"""Identifiers: random UUIDs as text, so every backend and language handles them alike."""

import uuid


def new_id() -> str:
    return str(uuid.uuid4())

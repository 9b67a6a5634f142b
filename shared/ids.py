"""Identifiers: random UUIDs as text, so every backend and language handles them alike."""

import uuid


def new_id() -> str:
    return str(uuid.uuid4())


def detached_job_key(job_id: str) -> str:
    """The idempotency key a detached job's execution takes its turn lease with (the store knows it by this)."""
    return f"{DETACHED_JOB_KEY_PREFIX}{job_id}"


DETACHED_JOB_KEY_PREFIX = "detached:"

"""The idempotency key a submit, a manual run, an action or a settlement retry may carry."""

from __future__ import annotations

import re

from shared.errors import invalid_argument

IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def check_idempotency_key(key: str, field: str = "idempotency_key") -> None:
    if key and not IDEMPOTENCY_KEY.match(key):
        raise invalid_argument(field, "use 1-128 characters of letters, digits and . _ : -")

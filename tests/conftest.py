"""Fixtures shared by every test area."""

from __future__ import annotations

import os
import socket

import pytest

POSTGRES_URL = os.environ.get("COVEL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def free_addr() -> str:
    """A loopback address with a port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def addr() -> str:
    return free_addr()

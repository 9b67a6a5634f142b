"""Fixtures shared by every test area."""

from __future__ import annotations

import os
import socket

import pytest

POSTGRES_URL = os.environ.get("COVEL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

# Probe plugins of the suite report through files (in the data dir they find in COVEL_DATA_DIR, or in
# tmp_path): unless a test says otherwise, their sandbox workers keep those folders, that variable and
# the service's uid; they still run in worker processes, in their namespaces, with the limits and the
# kills (docs/security.md, "Plugin sandbox"). SHIPPED_SANDBOX is the sandbox as it ships, for
# tests/security/test_plugin_sandbox.py and tests/sandbox.
OBSERVABLE_SANDBOX = {
    "COVEL_SANDBOX_HIDE_DIRS": "false",
    "COVEL_SANDBOX_DROP_PRIVILEGES": "false",
    "COVEL_SANDBOX_PASS_ENV": "COVEL_DATA_DIR,EVENT_KEY_PROBE_SLEEP_S",
}
SHIPPED_SANDBOX = {"COVEL_SANDBOX_HIDE_DIRS": "true", "COVEL_SANDBOX_DROP_PRIVILEGES": "true", "COVEL_SANDBOX_PASS_ENV": ""}
for _name, _value in OBSERVABLE_SANDBOX.items():
    os.environ.setdefault(_name, _value)
# A covel.env in the checkout (what `covel onboard` writes) must not change what the suite runs against.
os.environ.setdefault("COVEL_CONFIG_FILE", os.devnull)


def free_addr() -> str:
    """A loopback address with a port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def addr() -> str:
    return free_addr()

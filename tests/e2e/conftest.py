"""The five services as real processes on free loopback ports, shared by the end-to-end tests."""

from __future__ import annotations

import os

import pytest_asyncio

from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.settings import REPO_ROOT

TEST_PLUGIN_DIR = REPO_ROOT / "tests" / "fixtures" / "plugins"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    group = ServiceGroup(
        free_port_addrs(),
        tmp_path_factory.mktemp("covel-data"),
        extra_env={
            "COVEL_PLUGIN_DIRS": os.pathsep.join([str(REPO_ROOT / "plugins"), str(TEST_PLUGIN_DIR)]),
            "COVEL_LOG_LEVEL": "info",
        },
    )
    try:
        await group.start()
        yield group
    finally:
        await group.stop()

"""The five services as real processes on free loopback ports, for the end-to-end tests."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
import yaml

from covel.scheduler.v1 import scheduler_pb2
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.settings import REPO_ROOT

TEST_PLUGIN_DIR = REPO_ROOT / "tests" / "fixtures" / "plugins"
STORY_ENGINE = "narrator"


def _core_plugins() -> tuple[str, ...]:
    """The builtin plugins whose PLUGIN.md says `kind: core` (every new session gets them unless excluded)."""
    found = []
    for manifest in sorted((REPO_ROOT / "plugins").glob("*/PLUGIN.md")):
        front = manifest.read_text(encoding="utf-8").split("---")[1]
        if (yaml.safe_load(front) or {}).get("kind") == "core":
            found.append(manifest.parent.name)
    return tuple(found)


CORE_PLUGINS = _core_plugins()
# The core plugins a minimal session leaves out: all but the story engine.
NON_STORY_CORE_PLUGINS = tuple(plugin for plugin in CORE_PLUGINS if plugin != STORY_ENGINE)


def minimal_session(*, excluded_plugins=(), **fields) -> scheduler_pb2.CreateSessionRequest:
    """A CreateSessionRequest for a minimal session: the narrator and the requested plugins only (the
    other core plugins, such as world-time, memory and history-compaction, are excluded)."""
    excluded = [*NON_STORY_CORE_PLUGINS, *(p for p in excluded_plugins if p not in NON_STORY_CORE_PLUGINS)]
    return scheduler_pb2.CreateSessionRequest(excluded_plugins=excluded, **fields)


@contextlib.asynccontextmanager
async def running_services(
    data_dir: Path, *, plugin_dirs: tuple[Path, ...] = (TEST_PLUGIN_DIR,), script: dict | None = None
) -> AsyncIterator[ServiceGroup]:
    """Start the five services (builtin plugins plus `plugin_dirs`; a gateway script if given); stop them after."""
    env = {
        "COVEL_PLUGIN_DIRS": os.pathsep.join([str(REPO_ROOT / "plugins"), *map(str, plugin_dirs)]),
        "COVEL_LOG_LEVEL": "info",
    }
    if script is not None:
        script_file = data_dir / "gateway-script.yaml"
        script_file.write_text(yaml.safe_dump(script))
        env["COVEL_GATEWAY_SCRIPT"] = str(script_file)
    group = ServiceGroup(free_port_addrs(), data_dir, extra_env=env)
    try:
        await group.start()
        yield group
    finally:
        await group.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("covel-data")) as group:
        yield group

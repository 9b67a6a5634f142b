"""The five services as real processes on free loopback ports, for the end-to-end tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
import yaml

from covel.scheduler.v1 import scheduler_pb2
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.settings import REPO_ROOT
from tests.support.builtin_plugins import core_plugin_ids, non_story_core_plugin_ids

TEST_PLUGIN_DIR = REPO_ROOT / "tests" / "fixtures" / "plugins"


# Probe plugins report through files (in the data dir they find in COVEL_DATA_DIR, or in tmp_path): their
# sandbox workers keep those folders and the service's uid. tests/security/test_plugin_sandbox.py runs
# the services with the sandbox's defaults.
OBSERVABLE_SANDBOX = {
    "COVEL_SANDBOX_HIDE_DIRS": "false",
    "COVEL_SANDBOX_DROP_PRIVILEGES": "false",
    "COVEL_SANDBOX_PASS_ENV": "COVEL_DATA_DIR,EVENT_KEY_PROBE_SLEEP_S",
}
CORE_PLUGINS = core_plugin_ids()
# The core plugins a minimal session leaves out: all but the story engine.
NON_STORY_CORE_PLUGINS = non_story_core_plugin_ids()


def minimal_session(*, excluded_plugins=(), **fields) -> scheduler_pb2.CreateSessionRequest:
    """A CreateSessionRequest for a minimal session: the narrator and the requested plugins only (the
    other core plugins, such as world-time, memory and history-compaction, are excluded)."""
    excluded = [*NON_STORY_CORE_PLUGINS, *(p for p in excluded_plugins if p not in NON_STORY_CORE_PLUGINS)]
    return scheduler_pb2.CreateSessionRequest(excluded_plugins=excluded, **fields)


@contextlib.asynccontextmanager
async def running_services(
    data_dir: Path, *, plugin_dirs: tuple[Path, ...] = (TEST_PLUGIN_DIR,), script: dict | None = None,
    observable_sandbox: bool = True, extra_env: dict[str, str] | None = None,
) -> AsyncIterator[ServiceGroup]:
    """Start the five services (builtin plugins plus `plugin_dirs`; a gateway script if given); stop them after.
    `observable_sandbox=False`: the sandbox as it ships (tests/security/test_plugin_sandbox.py)."""
    env = {
        "COVEL_PLUGIN_DIRS": os.pathsep.join([str(REPO_ROOT / "plugins"), *map(str, plugin_dirs)]),
        "COVEL_LOG_LEVEL": "info",
        **(OBSERVABLE_SANDBOX if observable_sandbox else {}),
        **(extra_env or {}),
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


async def restart_gateway(group: ServiceGroup, script: dict, timeout_s: float = 30.0) -> None:
    """Give a running group's gateway a fresh `script`: stop it, write the script, start it again on
    the same address (the scheduler's channel reconnects). A test that consumes scripted reply
    queues starts with its own queues this way, whichever tests ran before it."""
    script_file = group.data_dir / "gateway-script.yaml"
    if group.extra_env.get("COVEL_GATEWAY_SCRIPT") != str(script_file):
        raise ValueError("restart_gateway needs a group started by running_services with a script")
    old = group.processes["gateway"]
    if old.returncode is None:
        old.send_signal(signal.SIGTERM)
        await asyncio.wait_for(old.wait(), timeout_s)
    script_file.write_text(yaml.safe_dump(script))
    await group.restart("gateway", timeout_s)


class SharedGroup:
    """The default group, started once a session for the modules that set SHARED_SERVICES (and stopped at its end)."""

    def __init__(self, stack: contextlib.AsyncExitStack, tmp_path_factory) -> None:
        self._stack, self._tmp_path_factory, self._group = stack, tmp_path_factory, None

    async def group(self) -> ServiceGroup:
        if self._group is None:
            data_dir = self._tmp_path_factory.mktemp("covel-data-shared")
            self._group = await self._stack.enter_async_context(running_services(data_dir))
        return self._group


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def shared_group(tmp_path_factory):
    async with contextlib.AsyncExitStack() as stack:
        yield SharedGroup(stack, tmp_path_factory)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(request, shared_group, tmp_path_factory):
    """The default group. A module that only opens sessions of its own in it (no stopped or restarted
    service, no reading of the group's data dir or logs, nothing counted from a fresh start) sets
    `SHARED_SERVICES = True` and gets the session's one group; every other module a group of its own."""
    if getattr(request.module, "SHARED_SERVICES", False):
        yield await shared_group.group()
        return
    async with running_services(tmp_path_factory.mktemp("covel-data")) as group:
        yield group

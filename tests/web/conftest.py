"""The web front beside the five services: `web` is a running `python -m services.web` on a free port."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest_asyncio

from covel_cli.launcher import ServiceGroup
from shared.settings import REPO_ROOT
from tests.conftest import free_addr
from tests.e2e.conftest import running_services

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@dataclass
class WebFront:
    group: ServiceGroup
    url: str
    process: asyncio.subprocess.Process
    metrics_url: str


@contextlib.asynccontextmanager
async def running_web(group: ServiceGroup) -> AsyncIterator[WebFront]:
    addr, metrics_addr = free_addr(), free_addr()
    env = {**group.env(), "COVEL_WEB_ADDR": addr, "COVEL_WEB_METRICS_PORT": metrics_addr.rpartition(":")[2]}
    log = open(group.log_dir / "web.log", "ab")  # noqa: SIM115 -- closed below, after the process
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "services.web", env=env, cwd=REPO_ROOT,
                                                   stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL)
    url = f"http://{addr}"
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{url}/readyz")).status_code == 200:
                        break
                assert process.returncode is None, (group.log_dir / "web.log").read_text()
                await asyncio.sleep(0.05)
        yield WebFront(group, url, process, f"http://{metrics_addr}/metrics")
    finally:
        if process.returncode is None:
            process.terminate()
            await asyncio.wait_for(process.wait(), 15)
        log.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def web(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("web")) as group, running_web(group) as front:
        yield front


@pytest_asyncio.fixture(loop_scope="session")
async def browser():
    """Debian's Chromium, headless, driven by Playwright."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            await launched.close()


def shots(tmp_path: Path) -> Path:
    """The test's screenshot folder (in its output)."""
    folder = tmp_path / "screenshots"
    folder.mkdir(exist_ok=True)
    return folder

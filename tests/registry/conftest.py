"""Helpers for registry tests: fixture packages on disk and a real registry server."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from covel.registry.v1 import registry_pb2_grpc
from services.registry.server import start
from services.registry.settings import RegistrySettings
from tests.conftest import free_addr
from tests.support.identities import PolicyRoutedStub, bare_channel_as, service_tls

FIXTURES = Path(__file__).parent / "fixtures"


def write_plugin(plugin_dir: Path, plugin_id: str, frontmatter: str, body: str = "", files: dict[str, str] | None = None) -> Path:
    """A package folder `<plugin_dir>/<plugin_id>` with PLUGIN.md and extra files."""
    root = plugin_dir / plugin_id
    root.mkdir(parents=True, exist_ok=True)
    (root / "PLUGIN.md").write_text(f"---\n{textwrap.dedent(frontmatter).strip()}\n---\n{body}\n", encoding="utf-8")
    for relative, text in (files or {}).items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


class RegistryClient:
    def __init__(self, addr: str, channel: grpc.aio.Channel) -> None:
        self.addr = addr
        self.channel = channel
        # Each method as a caller the policy admits for it (the scheduler's, the hooks', the operator's).
        self.stub = PolicyRoutedStub(addr, registry_pb2_grpc.PluginRegistryStub, "covel.registry.v1.PluginRegistry")

    async def close(self) -> None:
        await self.stub.close()
        await self.channel.close()


async def started_registry(plugin_dirs: list[Path], builtin_dirs: list[Path] | None = None) -> tuple[object, RegistryClient]:
    addr = free_addr()
    builtin = {} if builtin_dirs is None else {"builtin_plugin_dirs": builtin_dirs}
    running = await start(RegistrySettings(registry_addr=addr, plugin_dirs=plugin_dirs, **builtin, **service_tls("registry")))
    channel = bare_channel_as(addr, "operator")
    return running, RegistryClient(addr, channel)


@pytest.fixture
async def registry_for() -> AsyncIterator[object]:
    """`await registry_for([dirs])` starts a registry over those plugin dirs (`builtin_dirs`: which are
    the operator's; default the repository's plugins/); stopped after the test."""
    started: list[tuple[object, RegistryClient]] = []

    async def factory(plugin_dirs: list[Path], builtin_dirs: list[Path] | None = None) -> RegistryClient:
        running, client = await started_registry(plugin_dirs, builtin_dirs)
        started.append((running, client))
        return client

    yield factory
    for running, client in started:
        await client.close()
        await running.stop(0)  # type: ignore[attr-defined]

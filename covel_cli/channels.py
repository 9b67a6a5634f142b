"""`covel channel <plugin>`: host a hookspec plugin's channels against running services.

The plugin's entry module is loaded here (as the hooks service loads it), and its hookimpls give the
channels (`provide_channels(message_handler)`). Each inbound envelope a channel hands to
`message_handler` goes to a session: the first `resolve_session(message)` answer, else one new session
per (channel, chat_id) in the world `--world`, set up as `covel play` sets one up. Its `content` is one
line as `covel play` takes it (an action, or a command such as `/answer name=Wren`), submitted through
the scheduler's API; what the turn printed goes back through that channel's `send(message)`. The host
runs until every channel's `start()` has returned, then calls each `stop()`.
"""

from __future__ import annotations

import argparse
import asyncio
import io
from pathlib import Path
from typing import Any

from covel.scheduler.v1 import scheduler_pb2_grpc
from covel_cli.play import _create_session, _one_line, start_setup
from services.hooks.plugin_side.entry_loader import EntryFailed, run_register
from services.registry.settings import RegistrySettings
from shared.grpc_client import open_client_api_channel
from shared.logs import get_logger
from shared.plugin_sdk.agent_plugins import RAISED, AgentPlugins
from shared.plugin_sdk.registrar import RegistrationError

log = get_logger(component="channels")


class HostFailed(RuntimeError):
    """The plugin cannot be hosted (a channel, a command): not found, failed to load, or gave nothing to run."""


def plugin_root(plugin_id: str, dirs: list[Path]) -> Path:
    for folder in dirs:
        if (folder / plugin_id / "PLUGIN.md").is_file():
            return folder / plugin_id
    raise HostFailed(f"no plugin {plugin_id!r} in the plugin folders ({', '.join(map(str, dirs))})")


def hookimpls_of(plugin_id: str, root: Path) -> list[Any]:
    """The plugin's @hookimpl objects, from its entry module's register(covel) (`covel validate-plugin` checks
    the rest of the package)."""
    try:
        registrar, _ = run_register(plugin_id, root, "server/index.py", generation=0)
    except (RegistrationError, EntryFailed) as error:
        raise HostFailed(f"{plugin_id}: {error}") from error
    objects = registrar.hookimpl_objects
    if not objects:
        raise HostFailed(f"{plugin_id} registers no @hookimpl objects (covel.register_hookimpls)")
    return objects


class ChannelHost:
    """One plugin's channels: inbound envelopes become turns, what a turn printed goes back out."""

    def __init__(self, stub: scheduler_pb2_grpc.SchedulerStub, plugins: AgentPlugins, world_id: str) -> None:
        self.stub = stub
        self.plugins = plugins
        self.world_id = world_id
        self.channels: dict[str, Any] = {}
        self.sessions: dict[tuple[str, str], str] = {}

    def open(self) -> list[Any]:
        for impl in self.plugins.hooks.impls("provide_channels"):
            offered = impl.function(message_handler=self.handle)
            for channel in offered if isinstance(offered, list) else []:
                self.channels[str(channel.name)] = channel
        if not self.channels:
            raise HostFailed("provide_channels gave no channel")
        return list(self.channels.values())

    async def session_for(self, envelope: dict[str, Any], out: io.StringIO) -> str:
        for impl in self.plugins.hooks.impls("resolve_session"):
            answer = await self.plugins.hooks.call("resolve_session", impl, message=envelope)
            if isinstance(answer, str) and answer:
                return answer
            if answer is not None and answer is not RAISED:
                self.plugins.hooks.wrong_type("resolve_session", impl, answer, "str or None")
        key = (str(envelope.get("channel") or ""), str(envelope.get("chat_id") or ""))
        if key not in self.sessions:
            self.sessions[key] = await _create_session(self.stub, out, [], self.world_id)
            await start_setup(self.stub, self.sessions[key], out)
        return self.sessions[key]

    async def handle(self, envelope: dict[str, Any]) -> None:
        """message_handler: one inbound envelope, its turn, the reply out through its channel."""
        out = io.StringIO()
        session_id = await self.session_for(envelope, out)
        line = str(envelope.get("content") or "").strip()
        if line:
            await _one_line(self.stub, session_id, line, out)
        channel = self.channels.get(str(envelope.get("channel") or "")) or next(iter(self.channels.values()))
        reply = {"channel": channel.name, "chat_id": envelope.get("chat_id"), "session_id": session_id, "content": out.getvalue()}
        if not await channel.send(reply):
            log.warning("channel.not_delivered", channel=channel.name, session_id=session_id)

    async def run(self) -> None:
        channels = self.open()
        try:
            await asyncio.gather(*(channel.start() for channel in channels))
        finally:
            for channel in channels:
                await channel.stop()


async def host(plugin_id: str, scheduler_addr: str, world_id: str) -> int:
    plugins = AgentPlugins(plugins=hookimpls_of(plugin_id, plugin_root(plugin_id, RegistrySettings().plugin_dirs)))
    async with plugins.running(), open_client_api_channel(scheduler_addr) as channel:
        await ChannelHost(scheduler_pb2_grpc.SchedulerStub(channel), plugins, world_id).run()
    return 0


def add_parser(commands: Any, run: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "channel", help="host a plugin's channels (provide_channels): their messages play turns against running services")
    parser.add_argument("plugin", help="the plugin id (in COVEL_PLUGIN_DIRS), e.g. stdio-channel")
    parser.add_argument("--addr", help="scheduler address (default: COVEL_SCHEDULER_ADDR)")
    parser.add_argument("--world", help="the world of new sessions (default: the demo world; none: no world)")
    parser.set_defaults(run=run)

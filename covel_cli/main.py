"""`covel`: run the services locally, play, and check health."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from covel_cli.card_commands import add_parsers as add_card_commands
from covel_cli.channels import HostFailed
from covel_cli.channels import add_parser as add_channel
from covel_cli.channels import host as host_channels
from covel_cli.describe_authoring import add_parser as add_describe_authoring
from covel_cli.hooks_info import add_parser as add_hooks_info
from covel_cli.launcher import (
    RESTART_WINDOW_S,
    RESTARTS,
    SERVICES,
    ServiceFailed,
    ServiceGroup,
    configured_addrs,
    free_port_addrs,
)
from covel_cli.onboard import add_parser as add_onboard
from covel_cli.onboard import onboard
from covel_cli.operator import add_parser as add_operator
from covel_cli.play import DEFAULT_WORLD, DEMO_ACTIONS, list_worlds, play, read_terminal_line, scripted_reader
from covel_cli.plugin_commands import add_parser as add_plugin_command
from covel_cli.plugin_commands import run as run_plugin_command
from covel_cli.prompt_parity import add_parser as add_check_prompts
from covel_cli.refusals import service_health
from covel_cli.validate_plugin import add_parser as add_validate_plugin
from covel_cli.validate_world import add_parser as add_validate_world
from services.web.settings import WebSettings
from shared.settings import DataDirSetting


async def _up(args: argparse.Namespace) -> int:
    group = ServiceGroup(configured_addrs(), DataDirSetting().data_dir, web_addr=None if args.no_web else WebSettings().web_addr)
    print(f"Starting {', '.join(SERVICES)}{' and the web front' if group.web_addr else ''} (data in {group.data_dir}, logs in {group.log_dir}, "
          f"service certificates in {group.pki.folder}) …", flush=True)
    stop_requested = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_requested.set)
    try:
        await group.start()
    except (ServiceFailed, OSError) as error:
        print(f"covel up: {error}", file=sys.stderr)
        await group.stop()
        return 1
    for name in SERVICES:
        print(f"  {name:<10} {group.addrs[name]}  SERVING", flush=True)
    if group.web_addr:
        print(f"  {'web':<10} {group.web_addr}  SERVING\n\nPlay in a browser: {group.web_url}\n", flush=True)
    def restarting(name: str, code: int) -> None:
        why = group.last_problem(name)
        print(f"covel up: service {name} exited with code {code}{f' ({why})' if why else ''}; starting it again", file=sys.stderr, flush=True)

    exited = asyncio.create_task(group.keep_running(on_restart=restarting))
    waiters: list[asyncio.Task[object]] = [exited, asyncio.create_task(stop_requested.wait())]
    played = None
    if args.play:
        played = asyncio.create_task(play(group.addrs["scheduler"], read_terminal_line, world_id=DEFAULT_WORLD))
        waiters.append(played)
    else:
        print("Press Ctrl-C to stop. Play with `covel play` in another terminal.", flush=True)
    try:
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if exited in done:
            name, code = exited.result()
            why = group.last_problem(name)
            print(f"covel up: service {name} exited with code {code}{f' ({why})' if why else ''}, more than {RESTARTS} times "
                  f"in {RESTART_WINDOW_S:.0f} s; stopping the others. Its log: {group.log_dir / (name + '.log')}", file=sys.stderr)
            return 1
        if played is not None and played in done:
            return played.result()
        return 0
    finally:
        for task in waiters:
            task.cancel()
        await group.stop()
        print("covel up: stopped.", flush=True)


def _world(args: argparse.Namespace) -> str:
    """--world <id> (default: the demo world), or `none` for a session without a world."""
    if args.world == "none":
        return ""
    return args.world or DEFAULT_WORLD


async def _play(args: argparse.Namespace) -> int:
    addr = args.addr or configured_addrs()["scheduler"]
    return await play(addr, read_terminal_line, session_id=args.session or "", requested_plugins=args.plugin,
                      world_id="" if args.session else _world(args), opening_id=args.opening or "")


async def _demo(args: argparse.Namespace) -> int:
    group = ServiceGroup(free_port_addrs(), Path(args.data_dir) if args.data_dir else DataDirSetting().data_dir / "demo")
    try:
        await group.start()
        return await play(
            group.addrs["scheduler"], scripted_reader(DEMO_ACTIONS), requested_plugins=args.plugin, echo_input=True,
            world_id=_world(args),
        )
    except ServiceFailed as error:
        print(f"covel demo: {error}", file=sys.stderr)
        return 1
    finally:
        await group.stop()


async def _channel(args: argparse.Namespace) -> int:
    try:
        return await host_channels(args.plugin, args.addr or configured_addrs()["scheduler"], _world(args))
    except HostFailed as error:
        print(f"covel channel: {error}", file=sys.stderr)
        return 1


async def _plugin_command(args: argparse.Namespace) -> int:
    try:
        return await run_plugin_command(args)
    except HostFailed as error:
        print(f"covel plugin: {error}", file=sys.stderr)
        return 1


async def _worlds(args: argparse.Namespace) -> int:
    return await list_worlds(args.addr or configured_addrs()["scheduler"])


async def _health(args: argparse.Namespace) -> int:
    addrs = configured_addrs()
    data_dir = DataDirSetting().data_dir
    healthy, mismatches = True, []
    for name in SERVICES:
        # The internal services take only callers with a certificate of their CA: the operator's.
        status, mismatch = await service_health(name, addrs[name], data_dir)
        healthy &= status == "SERVING"
        mismatches += [mismatch] if mismatch else []
        print(f"{name:<10} {addrs[name]:<22} {status}")
    if mismatches:
        print(f"covel health: {mismatches[0]}", file=sys.stderr)
    return 0 if healthy else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="covel", description="Covel: plugin kernel for LLM-driven interactive stories.")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start all five services and the web front locally and supervise them")
    up.add_argument("--play", action="store_true", help="play a session in this terminal once they are up")
    up.add_argument("--no-web", action="store_true", help="without the web front (the player page at COVEL_WEB_ADDR)")
    up.set_defaults(run=_up)
    play_cmd = commands.add_parser("play", help="play a session against running services")
    play_cmd.add_argument("--addr", help="scheduler address (default: COVEL_SCHEDULER_ADDR)")
    play_cmd.add_argument("--session", help="continue this session id")
    play_cmd.add_argument("--plugin", action="append", default=[], help="enable a plugin (repeatable)")
    play_cmd.add_argument("--world", help=f"the id of a world (`covel worlds` lists them; default: {DEFAULT_WORLD}; none: no world)")
    play_cmd.add_argument("--opening", help="which of the world's openings starts the story (an imported card's greeting-<n>)")
    play_cmd.set_defaults(run=_play)
    demo = commands.add_parser("demo", help="start the services, play a short scripted session, stop")
    demo.add_argument("--data-dir", help="where the demo keeps its database and logs")
    demo.add_argument("--plugin", action="append", default=[], help="enable a plugin (repeatable)")
    demo.add_argument("--world", help=f"the id of a world (default: {DEFAULT_WORLD}; none: no world)")
    demo.set_defaults(run=_demo)
    worlds = commands.add_parser("worlds", help="list the worlds a session can start in (running services)")
    worlds.add_argument("--addr", help="scheduler address (default: COVEL_SCHEDULER_ADDR)")
    worlds.set_defaults(run=_worlds)
    health = commands.add_parser("health", help="gRPC health of the five services at their configured addresses")
    health.set_defaults(run=_health)
    add_channel(commands, _channel)
    add_plugin_command(commands, _plugin_command)
    add_onboard(commands, onboard)
    add_validate_plugin(commands)
    add_validate_world(commands)
    add_card_commands(commands)
    add_check_prompts(commands)
    add_describe_authoring(commands)
    add_hooks_info(commands)
    add_operator(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(args.run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into `head` and the like: the reader left, nothing is wrong.
        return 0


if __name__ == "__main__":
    sys.exit(main())


def cli() -> None:
    sys.exit(main())

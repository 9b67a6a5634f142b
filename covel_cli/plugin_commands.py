"""`covel plugin <plugin> <command> …`: the subcommands a hookspec plugin adds with register_cli_commands(app).

`app` is the argparse sub-command set of `covel plugin <plugin>`: a plugin adds a command with
`app.add_parser(name, help=…)`, its arguments with `add_argument`, and what runs with
`set_defaults(run=function)`; `function(args)` (plain or async) returns the exit code (None: 0). The
plugin's register(covel) runs in this process, as `covel channel` runs it (covel_cli/channels.py); its
provide_lifespan is entered before the command runs and left after it (services/hooks/plugin_side/lifespans.py:
one that fails to enter is reported and skipped, the command runs all the same).
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any

from covel_cli.channels import HostFailed, plugin_root
from services.hooks.plugin_side.entry_loader import EntryFailed, run_register
from services.hooks.plugin_side.hookspec_adapter import HookspecAdapter
from services.registry.settings import RegistrySettings
from shared.plugin_sdk.agent_plugins import hook_runtime
from shared.plugin_sdk.registrar import RegistrationError


def plugin_parser(plugin_id: str) -> tuple[argparse.ArgumentParser, HookspecAdapter | None]:
    """`covel plugin <plugin_id>` with the plugin's register_cli_commands subcommands, and its hookspec adapter."""
    try:
        registrar, adapter = run_register(plugin_id, plugin_root(plugin_id, RegistrySettings().plugin_dirs), "server/index.py",
                                          generation=0)
    except (RegistrationError, EntryFailed) as error:
        raise HostFailed(f"{plugin_id}: {error}") from error
    parser = argparse.ArgumentParser(prog=f"covel plugin {plugin_id}")
    app = parser.add_subparsers(dest="plugin_command", required=True)
    runtime = hook_runtime(registrar.hookimpl_objects)
    for impl in reversed(runtime.hook.register_cli_commands.get_hookimpls()):
        impl.function(app=app)
    if not app.choices:
        raise HostFailed(f"{plugin_id} adds no command (register_cli_commands)")
    return parser, adapter


async def run(args: argparse.Namespace) -> int:
    parser, adapter = plugin_parser(args.plugin)
    chosen = parser.parse_args(args.rest)
    if adapter is not None:
        await adapter.lifespans.enter()
    try:
        outcome: Any = chosen.run(chosen)
        if inspect.isawaitable(outcome):
            outcome = await outcome
    finally:
        if adapter is not None:
            await adapter.lifespans.leave()
    return int(outcome or 0)


def add_parser(commands: Any, run_command: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "plugin", help="run a command a plugin adds (register_cli_commands): covel plugin <plugin> <command> …")
    parser.add_argument("plugin", help="the plugin id (in COVEL_PLUGIN_DIRS)")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="the plugin's command and its arguments")
    parser.set_defaults(run=run_command)

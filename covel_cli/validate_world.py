"""`covel validate-world <dir|world.yaml>…`: static validation of world packages.

Runs the registry's world loader in this process (no server needed), against the plugin packages
of the plugin folders (COVEL_PLUGIN_DIRS; read, never run): the world's schema, its files, data
sources inside the package, characters against the character schema, the receiving plugins'
schemas and `authoring.references` (attribute-reference, dimension-reference), and reminders of
fields models never read. Prints, per world, ✓ or ✗ with its diagnostics as
`file:field: code message (hint)`, like `covel validate-plugin`, and exits the same way: 0 when
no world has an error, 1 when one has, 2 for bad usage (a path that names no world).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from covel_cli.validate_plugin import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, format_diagnostic
from services.registry.catalogue import package_folders
from services.registry.loaded_package import LoadedPackage
from services.registry.loaded_world import WORLD_FILE, LoadedWorld
from services.registry.package_guard import load_package_guarded
from services.registry.settings import RegistrySettings, source_of
from services.registry.world_loader import load_world_guarded


class NotAWorld(ValueError):
    pass


def world_folder(written: str) -> Path:
    path = Path(written)
    if path.is_file() and path.name == WORLD_FILE:
        return path.parent
    if path.is_dir() and (path / WORLD_FILE).is_file():
        return path
    raise NotAWorld(f"{written} is not a world package: name a folder with a {WORLD_FILE}, or its {WORLD_FILE}")


def installed_plugins(plugin_dirs: list[Path]) -> list[LoadedPackage]:
    """The plugin packages a world is checked against, loaded without running their code."""
    packages: dict[str, LoadedPackage] = {}
    for plugin_dir in plugin_dirs:
        for folder in package_folders(plugin_dir):
            package = load_package_guarded(folder, source=source_of(plugin_dir))
            packages.setdefault(package.id, package)
    return list(packages.values())


def print_report(world: LoadedWorld, out: TextIO) -> None:
    print(f"{'✓' if world.loaded else '✗'} {world.id}: {world.root_dir}", file=out)
    if world.loaded:
        print(f"  languages: world.yaml{''.join(f', {locale}' for locale in sorted(world.translations))}", file=out)
    for diagnostic in world.diagnostics:
        print(f"  {format_diagnostic(diagnostic)}", file=out)


def run(paths: list[str], out: TextIO | None = None, err: TextIO | None = None, plugin_dirs: list[Path] | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr  # read now: a test (or caller) may have replaced them
    if not paths:
        print("covel validate-world: name at least one world folder or world.yaml", file=err)
        return EXIT_USAGE
    try:
        folders = [world_folder(path) for path in paths]
    except NotAWorld as error:
        print(f"covel validate-world: {error}", file=err)
        return EXIT_USAGE
    packages = installed_plugins(plugin_dirs if plugin_dirs is not None else RegistrySettings().plugin_dirs)
    worlds = [load_world_guarded(folder, packages) for folder in folders]
    for world in worlds:
        print_report(world, out)
    failed = [world.id for world in worlds if not world.loaded]
    warnings = sum(1 for world in worlds for diagnostic in world.diagnostics if not diagnostic.is_error)
    summary = f"{len(worlds) - len(failed)} of {len(worlds)} world(s) valid"
    if warnings:
        summary += f", {warnings} warning(s)"
    print(summary, file=out)
    return EXIT_ERRORS if failed else EXIT_OK


async def command(args: argparse.Namespace) -> int:
    return run(args.paths)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "validate-world",
        help="statically validate world packages against the installed plugins (a folder or its world.yaml)",
    )
    parser.add_argument("paths", nargs="+", metavar="dir|world.yaml")
    parser.set_defaults(run=command)

"""`covel import <file|dir> [--world <id>]` and `covel export <world> --format png|charx|lorebook`: character cards and
lorebooks in and out of world packages (docs/worlds.md, "Import"). Both run here, without a server: import
writes the world into the first worlds folder (COVEL_WORLD_DIRS) or `--worlds-dir`, where the registry serves it
after its next scan (`covel operator reload`, or its start); a refusal names the field and exits 1."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from covel_cli.validate_plugin import EXIT_ERRORS, EXIT_OK, EXIT_USAGE
from services.registry.importing.card_export import card_charx, card_png, loaded_world, lorebook_json
from services.registry.importing.importer import import_bytes, read_path
from services.registry.settings import RegistrySettings
from shared.errors import ServiceError


def _worlds_dir(args: argparse.Namespace) -> Path:
    return Path(args.worlds_dir) if args.worlds_dir else RegistrySettings().world_dirs[0]


def run_import(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    path = Path(args.path)
    if not path.exists():
        print(f"covel import: {path} does not exist", file=err)
        return EXIT_USAGE
    try:
        if args.merge and not args.world:
            print("covel import: --merge needs --world <id>, the world to merge into", file=err)
            return EXIT_USAGE
        world = import_bytes(read_path(path), _worlds_dir(args), args.world or "", replace=args.replace, merge=args.merge)
    except ServiceError as error:
        print(f"covel import: refused: {error.message}", file=err)
        return EXIT_ERRORS
    manifest = world.manifest
    assert manifest is not None
    print(f"✓ {world.id}: {world.root_dir} ({len(world.characters)} character(s), {len(world.lorebook)} lorebook entries, "
          f"{len(manifest.openings or [])} more opening(s), {len(manifest.media or [])} media file(s))", file=out)
    print(f"  a running registry serves it after `covel operator reload`; play it with `covel play --world {world.id}`", file=out)
    return EXIT_OK


def run_export(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    folder = Path(args.world)
    if not folder.is_dir():
        folder = _worlds_dir(args) / args.world
    if not folder.is_dir():
        print(f"covel export: {args.world} is neither a world folder nor a world of {_worlds_dir(args)}", file=err)
        return EXIT_USAGE
    try:
        world = loaded_world(folder)
    except ServiceError as error:
        print(f"covel export: {error.message}", file=err)
        return EXIT_ERRORS
    body = {"png": card_png, "charx": card_charx, "lorebook": lorebook_json}[args.format](world)
    target = Path(args.output or f"{world.id}.{'json' if args.format == 'lorebook' else args.format}")
    target.write_bytes(body)
    what = "lorebook_v3" if args.format == "lorebook" else f"Character Card V3, {args.format}"
    print(f"✓ {world.id} -> {target} ({what}, {len(body)} bytes)", file=out)
    return EXIT_OK


async def _import(args: argparse.Namespace) -> int:
    return run_import(args)


async def _export(args: argparse.Namespace) -> int:
    return run_export(args)


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    imports = commands.add_parser("import", help="turn a character card (PNG, JSON, CHARX) or a lorebook into a world package")
    imports.add_argument("path", metavar="file|dir", help="a card or lorebook file, or an unpacked CHARX folder")
    imports.add_argument("--world", help="the new world's id (default: from the card's name)")
    imports.add_argument("--worlds-dir", help="the worlds folder to write into (default: the first of COVEL_WORLD_DIRS)")
    imports.add_argument("--replace", action="store_true", help="replace a world with the same id")
    imports.add_argument("--merge", action="store_true",
                         help="add the file's lorebook entries, characters, openings and media to the existing world --world")
    imports.set_defaults(run=_import)
    exports = commands.add_parser("export", help="write a world as a Character Card V3 (PNG or CHARX)")
    exports.add_argument("world", help="a world folder, or the id of a world of the worlds folder")
    exports.add_argument("--format", choices=("png", "charx", "lorebook"), default="png",
                         help="a V3 card as PNG or CHARX, or the lorebook alone as lorebook_v3 JSON")
    exports.add_argument("-o", "--output", help="the file to write (default: <world>.<format>)")
    exports.add_argument("--worlds-dir", help="the worlds folder to find the world in (default: the first of COVEL_WORLD_DIRS)")
    exports.set_defaults(run=_export)

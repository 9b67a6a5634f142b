"""`covel describe-authoring [--check]`: every authoring declaration of the installed plugins (a
`contributes.data.<namespace>.authoring`: what a world author provides there, where, and whether the in-app generator
may fill it), read without running plugin code; `--check` validates each declaration's `example` against its
namespace's schema and exits 1 naming every broken one (the spec's describe:authoring)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import yaml

from covel_cli.validate_world import installed_plugins
from services.registry.loaded_package import LoadedPackage
from services.registry.settings import RegistrySettings
from shared import json_schemas

SHOWN = ("title", "summary", "hint", "source", "characterField", "generate")


def declarations(packages: list[LoadedPackage]) -> Iterator[tuple[LoadedPackage, str, dict[str, Any], dict[str, Any]]]:
    """(package, namespace, the namespace's declaration, its authoring) of every loaded package, by plugin id."""
    for package in sorted(packages, key=lambda p: p.id):
        data = ((package.definition.get("contributes") or {}).get("data") or {}) if package.loaded else {}
        for namespace, declared in sorted(data.items()):
            if isinstance(declared, dict) and isinstance(declared.get("authoring"), dict):
                yield package, namespace, declared, declared["authoring"]


def _example(package: LoadedPackage, written: Any) -> Any:
    """An inline example, or the package file it names (.json, .yaml)."""
    if isinstance(written, str) and written.endswith((".json", ".yaml", ".yml")):
        path = (package.root_dir / written).resolve()
        if not path.is_relative_to(package.root_dir.resolve()):
            raise ValueError(f"the example {written} is outside the package")
        text = path.read_text(encoding="utf-8")
        return json.loads(text) if written.endswith(".json") else yaml.safe_load(text)
    return written


def example_problems(package: LoadedPackage, declared: dict[str, Any], authoring: dict[str, Any]) -> list[str]:
    """What is wrong with the declaration's example (each record of a list against the schema); [] without one."""
    if "example" not in authoring:
        return []
    schema_file = declared.get("schema")
    try:
        example = _example(package, authoring["example"])
        schema = json.loads((package.root_dir / schema_file).read_text(encoding="utf-8")) if isinstance(schema_file, str) else schema_file
    except (OSError, ValueError, yaml.YAMLError) as error:
        return [f"example: cannot be read ({error})"]
    if not isinstance(schema, dict):
        return ["example: the namespace has no schema to check it against"]
    validator = json_schemas.validator(schema)
    records = example if isinstance(example, list) else [example]
    return [f"example[{index}]{'/' + '/'.join(map(str, error.absolute_path)) if error.absolute_path else ''}: {error.message}"
            for index, record in enumerate(records) for error in validator.iter_errors(record)]


def run(plugin_dirs: list[Path], check: bool, out: TextIO) -> int:
    broken = 0
    for package, namespace, declared, authoring in declarations(installed_plugins(plugin_dirs)):
        accepts = declared.get("accepts")
        print(f"{package.id} · {namespace} (accepts {', '.join(accepts) if isinstance(accepts, list) else accepts or 'nothing'})", file=out)
        for key in SHOWN:
            if key in authoring:
                print(f"  {key}: {json.dumps(authoring[key], ensure_ascii=False)}", file=out)
        if authoring.get("references"):
            print(f"  references: {len(authoring['references'])}", file=out)
        print(f"  example: {'yes' if 'example' in authoring else 'none'}", file=out)
        if check:
            for problem in example_problems(package, declared, authoring):
                broken += 1
                print(f"  ✗ {problem}", file=out)
    return 1 if broken else 0


async def command(args: argparse.Namespace) -> int:
    import sys

    return run([Path(path) for path in args.plugins] or RegistrySettings().plugin_dirs, args.check, sys.stdout)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("describe-authoring", help="every plugin's authoring declarations (what worlds provide); --check their examples")
    parser.add_argument("--check", action="store_true", help="validate each example against its namespace's schema")
    parser.add_argument("--plugins", action="append", default=[], help="a plugin folder (repeatable; default: COVEL_PLUGIN_DIRS)")
    parser.set_defaults(run=command)

"""The generated tables of the docs (docs/plugins.md, settings.md, retries.md, security.md, api.md,
worlds.md, hookspecs.md and README.md), each from the models or tables it describes.

It lives in covel_cli, next to `covel validate-plugin`, because it is a developer tool that
reads several services' models (the registry's manifest models, every service's settings);
shared/ must not import a service. Run `python -m covel_cli.doc_tables --write` after changing
a manifest or settings model or the channels' tables; tests/docs/test_generated_tables.py fails
until the docs match.

A table sits between marker comments and is replaced whole:

    <!-- generated: manifest-fields:RuntimeDecl -->
    …
    <!-- end generated -->

`manifest-fields:<Model>` and `compiled-fields:<Model>` are manifest_doc_tables.py's,
`settings:<service>` settings_doc_tables.py's, `channel-rules`, `service-policy`, `public-enums` and `error-reasons`
api_doc_tables.py's, `world-fields:<Model>` world_doc_tables.py's, `hookspecs` hookspec_doc_tables.py's.
Meanings live in those modules rather than as Field(description=…) on the models; every field must
have one, so a new field fails the test.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from covel_cli.api_doc_tables import channel_rules_table, error_reasons_table, public_enums_table, service_policy_table
from covel_cli.hookspec_doc_tables import hookspecs_table
from covel_cli.import_doc_tables import IMPORT_TABLES, import_table
from covel_cli.manifest_doc_tables import COMPILED_MODELS, compiled_table, manifest_models, manifest_table
from covel_cli.settings_doc_tables import SETTINGS_MODELS, settings_table
from covel_cli.world_doc_tables import WORLD_MODELS, world_table
from shared.settings import REPO_ROOT

DOC_FILES = (REPO_ROOT / "docs" / "plugins.md", REPO_ROOT / "docs" / "settings.md", REPO_ROOT / "docs" / "retries.md",
             REPO_ROOT / "docs" / "security.md", REPO_ROOT / "docs" / "api.md", REPO_ROOT / "README.md")
# docs/worlds.md's tables come from covel_cli/world_doc_tables.py, docs/hookspecs.md's from covel_cli/hookspec_doc_tables.py.
WORLD_DOC_FILES = (REPO_ROOT / "docs" / "worlds.md", REPO_ROOT / "docs" / "hookspecs.md")
BLOCK = re.compile(r"(<!-- generated: (?P<key>[\w:.-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL)
WRITE_COMMAND = "python -m covel_cli.doc_tables --write"


def generated(key: str) -> str:
    """The text of the block named `key`."""
    kind, _, name = key.partition(":")
    if kind == "manifest-fields" and name in manifest_models():
        return manifest_table(name)
    if kind == "settings" and name in SETTINGS_MODELS:
        return settings_table(name)
    if kind == "compiled-fields" and name in COMPILED_MODELS:
        return compiled_table(name)
    if key == "channel-rules":
        return channel_rules_table()
    if kind == "world-fields" and name in WORLD_MODELS:
        return world_table(name)
    if kind == "import" and name in IMPORT_TABLES:
        return import_table(name)
    if key == "service-policy":
        return service_policy_table()
    if key == "public-enums":
        return public_enums_table()
    if key == "error-reasons":
        return error_reasons_table()
    if key == "hookspecs":
        return hookspecs_table()
    raise KeyError(f"<!-- generated: {key} -->: no such table; use manifest-fields:<Model>, compiled-fields:<Model>, settings:<service>, "
                   "world-fields:<Model>, import:<table>, channel-rules, service-policy, public-enums, error-reasons or hookspecs")


def all_keys() -> list[str]:
    """Every table the docs must hold."""
    return ([f"manifest-fields:{name}" for name in manifest_models()] + [f"settings:{name}" for name in SETTINGS_MODELS]
            + [f"compiled-fields:{name}" for name in COMPILED_MODELS] + ["channel-rules", "service-policy", "public-enums", "error-reasons", "hookspecs"])


def regenerate(text: str) -> str:
    return BLOCK.sub(lambda match: match.group(1) + generated(match.group("key")) + match.group(4), text)


def blocks_in(text: str) -> dict[str, str]:
    return {match.group("key"): match.group("body") for match in BLOCK.finditer(text)}


def stale_files() -> list[Path]:
    return [path for path in (*DOC_FILES, *WORLD_DOC_FILES) if path.exists() and regenerate(path.read_text(encoding="utf-8")) != path.read_text(encoding="utf-8")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m covel_cli.doc_tables", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the generated tables in place")
    args = parser.parse_args(argv)
    stale = stale_files()
    if args.write:
        for path in stale:
            path.write_text(regenerate(path.read_text(encoding="utf-8")), encoding="utf-8")
            print(f"updated {path.relative_to(REPO_ROOT)}")
        return 0
    for path in stale:
        print(f"{path.relative_to(REPO_ROOT)} is out of date: run {WRITE_COMMAND}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())

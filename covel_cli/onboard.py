"""`covel onboard`: the config file's settings, with what installed plugins add (the onboard_config hook).

    covel onboard [--set KEY=VALUE]… [--plugin ID]… [--dry-run]

It reads the config file (covel_cli/config_file.py: COVEL_CONFIG_FILE, default ./covel.env) as
`current_config`, applies the operator's `--set` values, then runs each installed plugin's entry module
here (plugins of COVEL_PLUGIN_DIRS in id order, `--plugin` narrowing them; as `covel plugin` runs one) and
calls its onboard_config impls in pluggy's order, each with a copy of the config as merged so far. What
an impl answers is merged key by key:

| key                                                 | what happens                                        |
|-----------------------------------------------------|-----------------------------------------------------|
| a kernel setting (docs/settings.md's tables)        | written as given (a value the operator `--set` wins)|
| one of the plugin's contributes.settings keys       | refused, named: the kernel has no operator-level value for plugin settings (a session sets them, else the package's default) |
| anything else, or a value that is not text, a number, a bool or JSON data | reported, skipped            |

An impl that raises (or does not return within IMPL_TIMEOUT_S) is reported and skipped. The changes are
printed (a secret's value as ***) and written atomically, mode 0600, keeping every other line (`--dry-run`:
printed only). Exit codes: 0 written or nothing to do, 1 a plugin failed to load (the others' answers are
written), 2 bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from covel_cli.config_file import Unwritable, assignment, read_config, shown, write_config
from services.hooks.plugin_side.entry_loader import EntryFailed, run_register
from services.registry.diagnostics import DiagnosticBag
from services.registry.frontmatter import parse_document
from services.registry.settings import RegistrySettings
from shared.plugin_sdk.agent_plugins import hook_runtime
from shared.plugin_sdk.registrar import RegistrationError
from shared.plugin_threads import call_plugin_code
from shared.settings import CONFIG_FILE_VARIABLE, config_file

HOOK = "onboard_config"
ENTRY = "server/index.py"
IMPL_TIMEOUT_S = 30.0
OPERATOR = "--set"


class BadFlags(ValueError):
    """A flag `covel onboard` cannot take (exit code 2)."""


def kernel_settings() -> set[str]:
    """Every environment variable the kernel's settings read (docs/settings.md's generated tables), but the
    config file's own: it cannot say where it is."""
    from covel_cli.settings_doc_tables import SETTINGS_MODELS, env_names  # the settings tables' own list (a heavy import)

    names = {name for model in SETTINGS_MODELS.values() for field_name, info in model.model_fields.items()
             for name in env_names(model, field_name, info)}
    return names - {CONFIG_FILE_VARIABLE}


@dataclass(frozen=True)
class InstalledPlugin:
    plugin_id: str
    root: Path
    # contributes.settings keys of PLUGIN.md.
    setting_keys: frozenset[str]


def setting_keys(manifest: Path) -> frozenset[str]:
    document = parse_document(manifest.read_text(encoding="utf-8"), DiagnosticBag(manifest.parent.name), "PLUGIN.md")
    contributes = document.data.get("contributes") if document is not None else None
    settings = contributes.get("settings") if isinstance(contributes, dict) else None
    return frozenset(str(entry["key"]) for entry in settings or [] if isinstance(entry, dict) and entry.get("key"))


def installed_plugins(dirs: Iterable[Path]) -> list[InstalledPlugin]:
    """The plugin packages with an entry module, in id order (of two with the same id the first folder's wins)."""
    found: dict[str, InstalledPlugin] = {}
    for folder in dirs:
        for root in sorted(folder.iterdir()) if folder.is_dir() else []:
            manifest = root / "PLUGIN.md"
            if root.name not in found and manifest.is_file() and (root / ENTRY).is_file():
                found[root.name] = InstalledPlugin(root.name, root, setting_keys(manifest))
    return [found[plugin_id] for plugin_id in sorted(found)]


@dataclass
class Onboarding:
    """The config as merged so far, where each change came from, and what was refused."""

    current: dict[str, str]
    known: set[str]
    merged: dict[str, str] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.merged = dict(self.current)

    def changes(self) -> dict[str, str]:
        return {key: value for key, value in self.merged.items() if self.current.get(key) != value}

    def set_by_operator(self, pairs: list[str]) -> None:
        for pair in pairs:
            key, equals, value = pair.partition("=")
            if not equals or not key.strip():
                raise BadFlags(f"--set {pair!r}: write KEY=VALUE")
            name = key.strip().upper()
            if name not in self.known:
                raise BadFlags(f"--set {name}: not a setting Covel knows (docs/settings.md lists them)")
            try:
                assignment(name, value)
            except Unwritable as error:
                raise BadFlags(f"--set {name}: {error}") from error
            self.merged[name], self.source[name] = value, OPERATOR

    def take(self, plugin: InstalledPlugin, answer: Any) -> None:
        """One impl's answer, merged key by key; what cannot be taken is reported."""
        if answer is None:
            return
        if not isinstance(answer, dict):
            self.problems.append(f"{plugin.plugin_id}: onboard_config returned {type(answer).__name__}, not a dict or None")
            return
        for key, value in answer.items():
            checked = self._checked(plugin, key, value)
            if isinstance(checked, str):
                self.problems.append(f"{plugin.plugin_id}: {key}: {checked}")
            elif self.source.get(checked[0]) == OPERATOR:
                self.problems.append(f"{plugin.plugin_id}: {checked[0]}: kept the value given with --set")
            else:
                self.merged[checked[0]], self.source[checked[0]] = checked[1], plugin.plugin_id

    def _checked(self, plugin: InstalledPlugin, key: Any, value: Any) -> tuple[str, str] | str:
        """(setting name, value as text), or why the key is refused."""
        if not isinstance(key, str):
            return "a key is a setting's name (a string)"
        if key in plugin.setting_keys:
            return ("a setting of the plugin (contributes.settings): Covel has no operator-level value for plugin settings; "
                    "a session sets it (plugin_settings), else the package's default applies")
        if key.upper() not in self.known:
            return "not a setting Covel knows (docs/settings.md lists them)"
        text = setting_text(value)
        if text is None:
            return f"a value of type {type(value).__name__}: give text, a number, a bool or JSON data"
        try:
            assignment(key.upper(), text)
        except Unwritable as error:
            return str(error)
        return key.upper(), text


def setting_text(value: Any) -> str | None:
    """A value as the file holds it: text as is, bools as true/false, numbers, lists and dicts as JSON; else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return str(value)
    if isinstance(value, (dict, list)):
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            return None
    return None


async def ask(plugin: InstalledPlugin, onboarding: Onboarding) -> None:
    """Load the plugin here and call its onboard_config impls; EntryFailed when it does not load."""
    try:
        registrar, _ = run_register(plugin.plugin_id, plugin.root, ENTRY, generation=0)
    except (RegistrationError, EntryFailed) as error:
        raise EntryFailed(f"{plugin.plugin_id}: {error}") from error
    if not registrar.hookimpl_objects:
        return
    runtime = hook_runtime(registrar.hookimpl_objects)
    for impl in reversed(runtime.hook.onboard_config.get_hookimpls()):
        try:
            answer = await asyncio.wait_for(call_plugin_code(impl.function, current_config=dict(onboarding.merged)),
                                            IMPL_TIMEOUT_S)
            if inspect.isawaitable(answer):
                answer = await asyncio.wait_for(answer, IMPL_TIMEOUT_S)
        except TimeoutError:
            onboarding.problems.append(f"{plugin.plugin_id}: {type(impl.plugin).__name__}.onboard_config did not return within "
                                       f"{IMPL_TIMEOUT_S:g} s")
            continue
        except Exception as error:  # plugin code: reported and skipped
            onboarding.problems.append(f"{plugin.plugin_id}: {type(impl.plugin).__name__}.onboard_config raised "
                                       f"{type(error).__name__}: {error}")
            continue
        onboarding.take(plugin, answer)


def chosen_plugins(wanted: list[str], dirs: list[Path]) -> list[InstalledPlugin]:
    plugins = installed_plugins(dirs)
    if not wanted:
        return plugins
    unknown = sorted(set(wanted) - {plugin.plugin_id for plugin in plugins})
    if unknown:
        raise BadFlags(f"--plugin {', '.join(unknown)}: no such plugin with an entry module in COVEL_PLUGIN_DIRS")
    return [plugin for plugin in plugins if plugin.plugin_id in wanted]


def report(path: Path, onboarding: Onboarding, *, dry_run: bool) -> None:
    for problem in onboarding.problems:
        print(f"covel onboard: skipped {problem}", file=sys.stderr)
    changes = onboarding.changes()
    if not changes:
        print(f"{path}: nothing to change")
        return
    print(f"{path}: {'would change' if dry_run else 'changed'}")
    for key, value in changes.items():
        print(f"  {key}={shown(key, value)}  ({onboarding.source.get(key, '')})")


async def onboard(args: argparse.Namespace) -> int:
    path = config_file().resolve()
    try:
        onboarding = Onboarding(read_config(path), kernel_settings())
        onboarding.set_by_operator(args.set)
        plugins = chosen_plugins(args.plugin, RegistrySettings().plugin_dirs)
    except BadFlags as error:
        print(f"covel onboard: {error}", file=sys.stderr)
        return 2
    failed = False
    for plugin in plugins:
        try:
            await ask(plugin, onboarding)
        except EntryFailed as error:
            print(f"covel onboard: {error}", file=sys.stderr)
            failed = True
    report(path, onboarding, dry_run=args.dry_run)
    changes = onboarding.changes()
    if changes and not args.dry_run:
        write_config(path, changes, onboarding.source)
    return 1 if failed else 0


def add_parser(commands: Any, run: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "onboard", help="write the config file (COVEL_CONFIG_FILE, default ./covel.env) with --set values and what "
                        "installed plugins add (onboard_config)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of your own (repeatable; wins over a plugin's)")
    parser.add_argument("--plugin", action="append", default=[], metavar="ID", help="ask only these plugins (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="print the changes, write nothing")
    parser.set_defaults(run=run)

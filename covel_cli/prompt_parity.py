"""`covel check-prompts`: the builtin plugins' prompts a model reads (an agent runtime's body: PLUGIN.md of an inline
agent, runtimes/<id>/RUNTIME.md) have a Simplified Chinese variant (PLUGIN.zh.md / RUNTIME.zh.md) that mentions the
same tools, injected blocks (`<name>`) and `runtime-inputs.<name>` as the English; and plugins/prompt-variants.lock.json
records the English each variant was last checked against, so an English prompt changed without its variant fails.
`covel check-prompts --lock` writes the lock once both are updated. A function runtime's body is documentation
(English only); community plugins need English only."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from services.registry.package_loader import load_package
from shared.settings import REPO_ROOT

LOCK_NAME = "prompt-variants.lock.json"
_BLOCK = re.compile(r"<([a-z][a-z0-9-]*)>")
_INPUT = re.compile(r"runtime-inputs\.([A-Za-z0-9_-]+)")
_TOOL = re.compile(r"`([a-z][a-z0-9_-]*)`")


@dataclass(frozen=True)
class Prompt:
    main: Path
    variant: Path
    tools: frozenset[str]


def _split(path: Path) -> tuple[dict[str, Any], str]:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return {}, text.strip()
    _, front, body = text.split("---", 2)
    return (yaml.safe_load(front) or {}), body.strip()


def agent_prompts(plugins_dir: Path) -> list[Prompt]:
    """Each agent runtime's prompt file of the packages in `plugins_dir`, as the registry loads them."""
    found = []
    for manifest in sorted(plugins_dir.glob("*/PLUGIN.md")):
        package = load_package(manifest.parent, source="builtin")
        for runtime in package.runtimes:
            if runtime.type != "agent" or not runtime.prompt.strip():
                continue
            agent = runtime.manifest.get("agent") or {}
            tools = frozenset([*agent.get("tools", {}).get("plugin", []), *([agent["finishWith"]] if agent.get("finishWith") else [])])
            main = manifest.parent / runtime.file
            found.append(Prompt(main, main.with_name(main.name.replace(".md", ".zh.md")), tools))
    return found


def mentions(body: str, tools: frozenset[str]) -> dict[str, set[str]]:
    return {"tools": {name for name in _TOOL.findall(body) if name in tools}, "blocks": set(_BLOCK.findall(body)),
            "inputs": set(_INPUT.findall(body))}


def digest(path: Path) -> str:
    return hashlib.sha256(_split(path)[1].encode("utf-8")).hexdigest()


def problems(plugins_dir: Path) -> list[str]:
    """What is wrong, one line each (file: what); [] when every variant follows its English."""
    lock_file = plugins_dir / LOCK_NAME
    lock = json.loads(lock_file.read_text(encoding="utf-8")) if lock_file.is_file() else {}
    found = []
    for prompt in agent_prompts(plugins_dir):
        name = prompt.variant.relative_to(plugins_dir).as_posix()
        if not prompt.variant.is_file():
            found.append(f"{name}: missing; a builtin agent's prompt has a Simplified Chinese variant")
            continue
        english, chinese = mentions(_split(prompt.main)[1], prompt.tools), mentions(_split(prompt.variant)[1], prompt.tools)
        found.extend(f"{name}: {kind} differ from the English: only English {sorted(english[kind] - chinese[kind])}, "
                     f"only Chinese {sorted(chinese[kind] - english[kind])}"
                     for kind in ("tools", "blocks", "inputs") if english[kind] != chinese[kind])
        if lock.get(name) != digest(prompt.main):
            found.append(f"{name}: the English ({prompt.main.name}) changed since this variant was locked: update it, then "
                         "run `covel check-prompts --lock`")
    return found


def write_lock(plugins_dir: Path) -> Path:
    lock = {prompt.variant.relative_to(plugins_dir).as_posix(): digest(prompt.main)
            for prompt in agent_prompts(plugins_dir) if prompt.variant.is_file()}
    path = plugins_dir / LOCK_NAME
    path.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


async def command(args: argparse.Namespace) -> int:
    plugins_dir = Path(args.plugins)
    if args.lock:
        print(f"wrote {write_lock(plugins_dir)}")
        return 0
    found = problems(plugins_dir)
    for line in found:
        print(f"✗ {line}")
    print(f"{len(agent_prompts(plugins_dir))} agent prompt(s), {len(found)} problem(s)")
    return 1 if found else 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("check-prompts", help="the builtin agents' zh prompt variants follow their English (and the lock)")
    parser.add_argument("--plugins", default=str(REPO_ROOT / "plugins"), help="the plugins folder (default: the repository's)")
    parser.add_argument("--lock", action="store_true", help=f"write {LOCK_NAME} after updating both languages")
    parser.set_defaults(run=command)

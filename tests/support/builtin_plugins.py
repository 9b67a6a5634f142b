"""The builtin plugin packages in the repo's plugins/ folder: which of them every new session gets."""

from __future__ import annotations

from pathlib import Path

import yaml

from shared.settings import REPO_ROOT

BUILTIN_PLUGIN_DIR = REPO_ROOT / "plugins"
STORY_ENGINE = "narrator"


def core_plugin_ids(folder: Path = BUILTIN_PLUGIN_DIR) -> tuple[str, ...]:
    """The packages whose PLUGIN.md says `kind: core` (in every new session unless excluded), sorted."""
    found = []
    for manifest in sorted(folder.glob("*/PLUGIN.md")):
        front = manifest.read_text(encoding="utf-8").split("---")[1]
        if (yaml.safe_load(front) or {}).get("kind") == "core":
            found.append(manifest.parent.name)
    return tuple(found)


def non_story_core_plugin_ids(folder: Path = BUILTIN_PLUGIN_DIR) -> tuple[str, ...]:
    """What a minimal session (the story engine and what it asks for) excludes."""
    return tuple(plugin for plugin in core_plugin_ids(folder) if plugin != STORY_ENGINE)


# The core plugins that take a new session of a world through its setup (docs/setup.md). A test about
# something else excludes them, so its first action is an ordinary turn, as in a session without them.
SETUP_PLUGINS = ("world-init", "char-creator", "pregame")

# What the demo world turns on besides its first plugins, to show a story world (docs/builtin-plugins.md). Each
# has its own tests; a test about something else leaves those it is not about out, so the model calls its
# session makes (and the recorded replies it needs) are the ones it expects.
STORY_WORLD_PLUGINS = ("story-events", "living-world-rules", "core-quest", "world-ir", "npc-graph", "codex", "scene-stage",
                       "soundtrack", "character-blueprint")


def story_world_plugins_except(*kept: str) -> tuple[str, ...]:
    return tuple(plugin for plugin in STORY_WORLD_PLUGINS if plugin not in kept)

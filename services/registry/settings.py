"""Settings of the plugin registry (COVEL_ environment variables)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from shared.settings import REPO_ROOT, DataDirSetting, ServiceSettings, default_plugin_dirs

BUILTIN = "builtin"
COMMUNITY = "community"


def default_world_dirs() -> list[Path]:
    return [REPO_ROOT / "worlds"]


def default_pack_files() -> list[Path]:
    return [REPO_ROOT / "packs" / "builtin.yaml"]


def split_dirs(value: str) -> list[str]:
    """`COVEL_PLUGIN_DIRS`: folders separated by os.pathsep (":" on POSIX) or commas."""
    return [part.strip() for part in re.split(rf"[,{re.escape(os.pathsep)}]", value) if part.strip()]


class RegistrySettings(ServiceSettings):
    # Folders that hold plugin packages as subfolders, scanned in order (the first of two
    # packages with the same id wins). Default: the repository's plugins/.
    plugin_dirs: Annotated[list[Path], NoDecode] = Field(default_factory=default_plugin_dirs)
    # The operator's own folders among them: their packages are builtin (may be `kind: core`, run
    # without the player's approval, cannot be replaced by InstallPackage). Every other folder,
    # and so every installed package, is community. Default: the repository's plugins/.
    builtin_plugin_dirs: Annotated[list[Path], NoDecode] = Field(default_factory=default_plugin_dirs)
    # Folders that hold world packages as subfolders (docs/worlds.md), scanned in order (the first
    # of two worlds with the same id wins). Default: the repository's worlds/.
    world_dirs: Annotated[list[Path], NoDecode] = Field(default_factory=default_world_dirs)
    # Files of packs (docs/worlds.md, "Plugin policy and packs"). Default: the repository's packs/builtin.yaml.
    pack_files: Annotated[list[Path], NoDecode] = Field(default_factory=default_pack_files)
    # Where validation results of unchanged packages are kept between starts (services/registry/validation_cache.py).
    # Default: `registry-cache` in the data dir.
    registry_cache_dir: Path | None = None

    def validation_cache_dir(self) -> Path:
        return self.registry_cache_dir if self.registry_cache_dir is not None else DataDirSetting().data_dir / "registry-cache"

    @field_validator("plugin_dirs", "builtin_plugin_dirs", "world_dirs", "pack_files", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [Path(part).expanduser() for part in split_dirs(value)]
        return value


def source_of(plugin_dir: Path, builtin_dirs: Sequence[Path] | None = None) -> str:
    """Packages of a builtin folder (COVEL_BUILTIN_PLUGIN_DIRS; default the repository's plugins/)
    are builtin; every other folder's are community."""
    builtin = {path.resolve() for path in (default_plugin_dirs() if builtin_dirs is None else builtin_dirs)}
    return BUILTIN if plugin_dir.resolve() in builtin else COMMUNITY

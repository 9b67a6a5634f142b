"""Settings of the plugin registry (COVEL_ environment variables)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from shared.settings import ServiceSettings, default_plugin_dirs

BUILTIN = "builtin"
COMMUNITY = "community"


def split_dirs(value: str) -> list[str]:
    """`COVEL_PLUGIN_DIRS`: folders separated by os.pathsep (":" on POSIX) or commas."""
    return [part.strip() for part in re.split(rf"[,{re.escape(os.pathsep)}]", value) if part.strip()]


class RegistrySettings(ServiceSettings):
    # Folders that hold plugin packages as subfolders, scanned in order (the first of two
    # packages with the same id wins). Default: the repository's plugins/.
    plugin_dirs: Annotated[list[Path], NoDecode] = Field(default_factory=default_plugin_dirs)

    @field_validator("plugin_dirs", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [Path(part).expanduser() for part in split_dirs(value)]
        return value


def source_of(plugin_dir: Path) -> str:
    """Packages from the repository's own plugins/ are builtin; every other folder is community."""
    builtin_dirs = {path.resolve() for path in default_plugin_dirs()}
    return BUILTIN if plugin_dir.resolve() in builtin_dirs else COMMUNITY

"""Packs (玩法包): named sets of plugins a world picks with `pluginPolicy.preset`, read from the pack files
(COVEL_PACK_FILES; default packs/builtin.yaml). A pack requests plugins for a session, recommends
others (offered, never turned on by themselves) and may exclude some. The kernel never decides
anything by a pack's id: packs are data, listed whole by ListPacks.

A pack file that cannot be read, or a pack in it that is not one, is left out with a diagnostic
(logged, and listed by ListPacks); the registry goes on with the other packs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import Field, ValidationError

from services.registry.diagnostics import Diagnostic, DiagnosticBag, add_validation_errors
from services.registry.manifest_fields import Strict
from services.registry.world_models import Name, PluginId, Text
from shared.bounded_yaml import load_yaml
from shared.logs import get_logger
from shared.settings import REPO_ROOT

log = get_logger(component="packs")

PACK_ID = r"^[a-z0-9][a-z0-9-]{0,63}$"
VIEW_MODE = r"^(stage|parsed|plugin:[a-z0-9][a-z0-9._-]*:[A-Za-z0-9._-]+)$"
LOCALE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")


class PackTexts(Strict):
    name: Name | None = None
    description: Text | None = None


class PackDecl(Strict):
    """One pack of a pack file."""

    id: Annotated[str, Field(pattern=PACK_ID)]
    name: Name
    description: Text | None = None
    requested: list[PluginId] = Field(default_factory=list)
    recommended: list[PluginId] = Field(default_factory=list)
    excluded: list[PluginId] = Field(default_factory=list)
    defaultViewMode: Annotated[str, Field(pattern=VIEW_MODE)] | None = None
    locales: dict[str, PackTexts] = Field(default_factory=dict)


class PackFile(Strict):
    packs: list[PackDecl] = Field(default_factory=list)


@dataclass(frozen=True)
class Pack:
    decl: PackDecl
    file: str

    @property
    def id(self) -> str:
        return self.decl.id

    def texts(self, locale: str) -> tuple[str, str]:
        """(name, description) in `locale` when the pack has it (zh-CN falls back to zh), else as written."""
        texts = self.decl.locales.get(locale) or self.decl.locales.get(locale.split("-")[0]) if locale else None
        name = (texts.name if texts and texts.name else None) or self.decl.name
        return name, (texts.description if texts and texts.description else None) or self.decl.description or ""


@dataclass
class Packs:
    by_id: dict[str, Pack] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def get(self, pack_id: str) -> Pack | None:
        return self.by_id.get(pack_id)


DEFAULT_PACK_FILES = (REPO_ROOT / "packs" / "builtin.yaml",)


def builtin_packs() -> Packs:
    """The packs of the repository's pack file (what `covel validate-world` and tests check worlds against)."""
    return load_packs(DEFAULT_PACK_FILES)


def load_packs(files: Sequence[Path]) -> Packs:
    found = Packs()
    for path in files:
        bag = DiagnosticBag(plugin_id="", file=path.name)
        for decl in _read(path, bag):
            if decl.id in found.by_id:
                bag.warning("duplicate-pack", f"pack `{decl.id}` is also in {found.by_id[decl.id].file}; this one is ignored",
                            field_path=f"packs.{decl.id}")
                continue
            unknown = [locale for locale in decl.locales if not LOCALE.match(locale)]
            if unknown:
                bag.error("pack-locale", f"`{unknown[0]}` is not a locale", field_path=f"packs.{decl.id}.locales")
                continue
            found.by_id[decl.id] = Pack(decl, path.name)
        for diagnostic in bag.items:
            log.warning("pack.diagnostic", file=str(path), diagnostic=str(diagnostic))
        found.diagnostics.extend(bag.items)
    return found


def _read(path: Path, bag: DiagnosticBag) -> list[PackDecl]:
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        bag.warning("pack-file-missing", f"the pack file {path.name} does not exist; it adds no packs")
        return []
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        bag.error("pack-file-yaml", f"the pack file cannot be read: {str(error).splitlines()[0]}")
        return []
    if not isinstance(data, dict):
        bag.error("pack-file-shape", "a pack file is a mapping with `packs: [...]`")
        return []
    packs = []
    for index, raw in enumerate(data.get("packs") or []):
        try:
            packs.append(PackDecl.model_validate(raw))
        except ValidationError as error:
            add_validation_errors(bag, error.errors(), raw, file=path.name, prefix=f"packs[{index}]")
    unknown = sorted(set(data) - {"packs"})
    if unknown:
        bag.error("unknown-key", f"unknown key `{unknown[0]}` in the pack file", field_path=unknown[0], hint="a pack file holds `packs`")
    return packs

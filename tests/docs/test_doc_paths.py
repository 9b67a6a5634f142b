"""Every file or folder of the repository that the docs and the services' READMEs name in backticks exists: a module
that moved takes its mentions with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shared.settings import REPO_ROOT

TOP = ("services", "shared", "covel_cli", "plugins", "tests", "deploy", "bench", "worlds", "protos", "packs", "docs")
NAMED = re.compile(r"`((?:" + "|".join(TOP) + r")/[A-Za-z0-9_./-]+?)`")
# Written by `make bench`, not committed.
GENERATED = ("bench/results/",)
PAGES = sorted([*REPO_ROOT.glob("docs/*.md"), *REPO_ROOT.glob("services/*/README.md"), REPO_ROOT / "README.md"])


def named_paths(text: str) -> list[str]:
    return [match.group(1).rstrip("/.") for match in NAMED.finditer(text)]


def exists(path: str) -> bool:
    """The path, or a module's attribute written as `shared/ui_panels.render_text`."""
    if (REPO_ROOT / path).exists():
        return True
    module, _, attribute = path.rpartition(".")
    return bool(attribute) and (REPO_ROOT / f"{module}.py").is_file()


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(REPO_ROOT)) for page in PAGES])
def test_the_paths_a_page_names_exist(page: Path) -> None:
    missing = sorted({path for path in named_paths(page.read_text()) if not path.startswith(GENERATED) and not exists(path)})
    assert not missing, f"{page.relative_to(REPO_ROOT)} names paths that do not exist: {missing}"


def test_a_missing_path_is_found() -> None:
    assert named_paths("see `services/store/nowhere.py` and `shared/ui_panels.render_text`") == [
        "services/store/nowhere.py", "shared/ui_panels.render_text"]
    assert not exists("services/store/nowhere.py") and exists("shared/ui_panels.render_text")

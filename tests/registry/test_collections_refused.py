"""Author info on collections (issue 40) is refused clearly: a Covel collection (a folder with covel-collection.yaml
and no PLUGIN.md) in a plugin folder is listed as a failed package with `collection-unsupported` saying what to do,
and `covel validate-plugin` on it says the same."""

from __future__ import annotations

import io
from pathlib import Path

from covel_cli.validate_plugin import run
from services.registry.catalogue import scan
from services.registry.loaded_package import PackageState
from tests.registry.conftest import write_plugin

COLLECTION = """\
name: Drowned things
version: 1.0.0
author: {name: Jane Doe, url: https://example.com}
plugins: [tide-clock]
"""


def collection(plugin_dir: Path) -> Path:
    folder = plugin_dir / "drowned-things"
    folder.mkdir(parents=True)
    (folder / "covel-collection.yaml").write_text(COLLECTION, encoding="utf-8")
    return folder


def test_a_collection_in_a_plugin_folder_is_a_failed_package_saying_why(tmp_path: Path) -> None:
    collection(tmp_path)
    write_plugin(tmp_path, "tide-clock", "version: 0.1.0\nauthor: {name: Jane Doe}")
    packages = {package.id: package for package in scan([tmp_path], builtin_dirs=[])}
    assert packages["tide-clock"].state == PackageState.LOADED, "a package next to it loads as before"
    refused = packages["drowned-things"]
    assert refused.state == PackageState.FAILED
    [diagnostic] = [d for d in refused.diagnostics if d.code == "collection-unsupported"]
    assert diagnostic.file == "covel-collection.yaml" and "reads no collections" in diagnostic.message
    assert "pack files" in (diagnostic.hint or "")
    assert not [d for d in refused.diagnostics if d.code == "plugin-manifest-missing"], "one clear reason, not two"


def test_validate_plugin_on_a_collection_says_it_is_one(tmp_path: Path) -> None:
    out = io.StringIO()
    assert run([str(collection(tmp_path))], out, io.StringIO()) == 1
    assert "collection-unsupported" in out.getvalue()

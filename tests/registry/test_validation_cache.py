"""The registry's validation cache: unchanged packages are not validated again, any change is."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from services.registry import validation_cache
from services.registry.catalogue import scan
from services.registry.settings import RegistrySettings
from services.registry.validation_cache import ValidationCache, folder_digest
from shared.settings import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "plugins"
# Packages with an entry module (probed) and one without.
PACKAGES = ("cli-probe", "admission-probe", "whisper-pack")


# The scans below read the folder as an operator's (builtin): only their register(covel) is probed at a scan.
@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "plugins"
    for name in PACKAGES:
        shutil.copytree(FIXTURES / name, folder / name)
    return folder


def outcome(packages) -> list:
    return [(p.id, p.state, [str(d) for d in p.diagnostics], p.definition, p.tags, p.hooks, p.entry, len(p.runtimes))
            for p in packages]


def test_a_second_scan_takes_every_result_from_the_cache_and_equals_a_scan_without_it(plugin_dir, tmp_path) -> None:
    uncached = scan([plugin_dir], builtin_dirs=[plugin_dir])
    first = ValidationCache(tmp_path / "cache")
    assert outcome(scan([plugin_dir], builtin_dirs=[plugin_dir], cache=first)) == outcome(uncached)
    probed = sum(1 for p in uncached if p.entry)
    assert (first.hits, first.misses) == (0, len(PACKAGES) + probed)
    second = ValidationCache(tmp_path / "cache")
    assert outcome(scan([plugin_dir], builtin_dirs=[plugin_dir], cache=second)) == outcome(uncached)
    assert (second.hits, second.misses) == (len(PACKAGES) + probed, 0)


def test_a_changed_file_validates_that_package_again_even_with_its_old_size_and_time(plugin_dir, tmp_path) -> None:
    scan([plugin_dir], builtin_dirs=[plugin_dir], cache=ValidationCache(tmp_path / "cache"))
    manifest = plugin_dir / "whisper-pack" / "PLUGIN.md"
    before = manifest.stat()
    text = manifest.read_text()
    changed = text.replace("description: ", "description: X", 1)[:-1] if text.endswith("\n") else None
    assert changed is not None and len(changed) == len(text) and changed != text
    manifest.write_text(changed)
    os.utime(manifest, ns=(before.st_atime_ns, before.st_mtime_ns))
    cache = ValidationCache(tmp_path / "cache")
    packages = {p.id: p for p in scan([plugin_dir], builtin_dirs=[plugin_dir], cache=cache)}
    assert packages["whisper-pack"].description.startswith("X")
    assert cache.misses == 1  # whisper-pack has no entry: its load only
    assert outcome(packages.values()) == outcome(scan([plugin_dir], builtin_dirs=[plugin_dir]))


def test_a_changed_entry_module_is_probed_again(plugin_dir, tmp_path) -> None:
    scan([plugin_dir], builtin_dirs=[plugin_dir], cache=ValidationCache(tmp_path / "cache"))
    entry = plugin_dir / "cli-probe" / "server" / "index.py"
    good = entry.read_text()
    entry.write_text(good + "\nraise ImportError('broken on purpose')\n")
    cache = ValidationCache(tmp_path / "cache")
    broken = {p.id: p for p in scan([plugin_dir], builtin_dirs=[plugin_dir], cache=cache)}["cli-probe"]
    assert not broken.loaded and any(d.code == "entry-load-failed" for d in broken.diagnostics), broken.diagnostics
    assert cache.misses == 2  # its load and its probe
    entry.write_text(good)
    cache = ValidationCache(tmp_path / "cache")
    assert {p.id: p for p in scan([plugin_dir], builtin_dirs=[plugin_dir], cache=cache)}["cli-probe"].loaded
    assert cache.misses == 0  # the good files' results were kept


@pytest.mark.parametrize("change", ["add file", "add folder", "remove file", "rename", "chmod", "content"])
def test_every_kind_of_change_to_a_package_changes_its_digest(plugin_dir, change) -> None:
    root = plugin_dir / "cli-probe"
    before = folder_digest(root)
    assert before is not None and folder_digest(root) == before
    entry = root / "server" / "index.py"
    if change == "add file":
        (root / "notes.txt").write_text("")
    elif change == "add folder":
        (root / "empty").mkdir()
    elif change == "remove file":
        entry.unlink()
    elif change == "rename":
        entry.rename(root / "server" / "main.py")
    elif change == "chmod":
        entry.chmod(0o600 if entry.stat().st_mode & 0o077 else 0o644)
    else:
        entry.write_text(entry.read_text().replace("Hello", "Hallo"))
    assert folder_digest(root) not in (None, before)


def test_a_package_with_a_symbolic_link_is_validated_every_time_and_never_kept(plugin_dir, tmp_path) -> None:
    (plugin_dir / "whisper-pack" / "link.md").symlink_to(tmp_path / "elsewhere.md")
    assert folder_digest(plugin_dir / "whisper-pack") is None
    first = ValidationCache(tmp_path / "cache")
    scan([plugin_dir], builtin_dirs=[plugin_dir], cache=first)
    second = ValidationCache(tmp_path / "cache")
    scan([plugin_dir], builtin_dirs=[plugin_dir], cache=second)
    assert second.misses == 1 and second.hits == first.misses - 1


def test_other_kernel_code_source_or_strictness_validates_again(plugin_dir, tmp_path, monkeypatch) -> None:
    scan([plugin_dir], builtin_dirs=[plugin_dir], cache=ValidationCache(tmp_path / "cache"))
    as_community = ValidationCache(tmp_path / "cache")
    scan([plugin_dir], cache=as_community)
    # Each load again (the source is part of its key); a community package's code is not probed at a scan.
    assert as_community.hits == 0 and as_community.misses == len(PACKAGES)
    strict = ValidationCache(tmp_path / "cache")
    scan([plugin_dir], builtin_dirs=[plugin_dir], strict=True, cache=strict)
    assert strict.misses >= len(PACKAGES)
    monkeypatch.setattr(validation_cache, "kernel_fingerprint", lambda: "another kernel")
    other_kernel = ValidationCache(tmp_path / "cache")
    scan([plugin_dir], builtin_dirs=[plugin_dir], cache=other_kernel)
    assert other_kernel.hits == 0


def test_the_kernel_hash_covers_the_code_files(tmp_path) -> None:
    code = tmp_path / "shared"
    (code / "sub").mkdir(parents=True)
    (code / "sub" / "module.py").write_text("A = 1\n")
    before = validation_cache._code_digest([code])
    (code / "sub" / "module.py").write_text("A = 2\n")
    assert validation_cache._code_digest([code]) != before
    assert validation_cache.CODE_DIRS == (REPO_ROOT / "services" / "registry", REPO_ROOT / "shared")


def test_the_probe_environment_is_part_of_the_key(plugin_dir, tmp_path, monkeypatch) -> None:
    scan([plugin_dir], builtin_dirs=[plugin_dir], cache=ValidationCache(tmp_path / "cache"))
    monkeypatch.setenv("COVEL_SANDBOX_MEMORY_MB", "333")
    cache = ValidationCache(tmp_path / "cache")
    scan([plugin_dir], builtin_dirs=[plugin_dir], cache=cache)
    assert cache.misses == 2 and cache.hits == len(PACKAGES)  # the two entries were probed again


def test_a_torn_cache_file_is_a_miss(plugin_dir, tmp_path) -> None:
    expected = outcome(scan([plugin_dir], builtin_dirs=[plugin_dir], cache=ValidationCache(tmp_path / "cache")))
    for kept in (tmp_path / "cache").rglob("*.pickle"):
        kept.write_bytes(kept.read_bytes()[:10])
    cache = ValidationCache(tmp_path / "cache")
    assert outcome(scan([plugin_dir], builtin_dirs=[plugin_dir], cache=cache)) == expected and cache.hits == 0
    assert outcome(scan([plugin_dir], builtin_dirs=[plugin_dir], cache=ValidationCache(tmp_path / "cache"))) == expected


def test_answers_the_probe_did_not_give_are_not_kept(plugin_dir, tmp_path) -> None:
    package = next(p for p in scan([plugin_dir], builtin_dirs=[plugin_dir]) if p.entry)
    cache = ValidationCache(tmp_path / "cache")
    calls = []

    def probe(missing):
        calls.append([p.id for p in missing])
        return {p.id: "timed out" for p in missing}

    assert cache.probe_answers([package], probe, keep=lambda answer: answer != "timed out") == {package.id: "timed out"}
    cache.probe_answers([package], probe, keep=lambda answer: True)
    assert calls == [[package.id], [package.id]]
    cache.probe_answers([package], probe, keep=lambda answer: True)
    assert len(calls) == 2


def test_an_unwritable_cache_folder_costs_only_the_time(plugin_dir, tmp_path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    assert outcome(scan([plugin_dir], builtin_dirs=[plugin_dir], cache=ValidationCache(blocked / "cache"))) == outcome(scan([plugin_dir], builtin_dirs=[plugin_dir]))


def test_the_cache_folder_is_a_setting_with_a_default_in_the_data_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("COVEL_REGISTRY_CACHE_DIR", raising=False)
    monkeypatch.setenv("COVEL_DATA_DIR", str(tmp_path / "data"))
    assert RegistrySettings().validation_cache_dir() == tmp_path / "data" / "registry-cache"
    monkeypatch.setenv("COVEL_REGISTRY_CACHE_DIR", str(tmp_path / "kept"))
    assert RegistrySettings().validation_cache_dir() == tmp_path / "kept"

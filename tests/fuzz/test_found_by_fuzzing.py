"""Failures the fuzz suite found, each kept as a plain example so it cannot come back unnoticed."""

from __future__ import annotations

import datetime
from pathlib import Path

import grpc
import pytest
import yaml

from covel.registry.v1 import registry_pb2
from services.registry.loaded_package import PackageState
from services.registry.package_loader import load_package
from shared.bounded_yaml import load_yaml
from shared.settings import REPO_ROOT
from tests.registry.conftest import started_registry
from tests.registry.test_install_and_validate_rpc import zip_folder

# Scalars PyYAML resolves (or is told by a tag) to a type, which then cannot read them: the loader
# raised ValueError / KeyError / AttributeError / IndexError out of load_package.
UNREADABLE_SCALARS = [
    ("version: 2024-13-45", "`2024-13-45` is not a valid timestamp"),
    ("released: 2024-01-01 10:00:00 +99:00", "is not a valid timestamp"),
    ("x: !!timestamp soon", "`soon` is not a valid timestamp"),
    ("x: !!int abc", "`abc` is not a valid int"),
    ("x: !!int ''", "is not a valid int"),
    ("x: !!float abc", "`abc` is not a valid float"),
    ("x: !!bool maybe", "`maybe` is not a valid bool"),
]


@pytest.mark.parametrize(("line", "problem"), UNREADABLE_SCALARS, ids=[line for line, _ in UNREADABLE_SCALARS])
def test_a_scalar_its_type_cannot_read_is_a_yaml_error_at_its_place(line: str, problem: str) -> None:
    with pytest.raises(yaml.YAMLError) as raised:
        load_yaml(f"id: dated\n{line}\n")
    assert problem in str(raised.value) and "line 2" in str(raised.value)


def test_a_manifest_with_an_impossible_date_fails_with_a_diagnostic(tmp_path: Path) -> None:
    root = tmp_path / "dated"
    root.mkdir()
    (root / "PLUGIN.md").write_text("---\nkind: plugin\nversion: 2024-13-45\n---\nBody.\n", encoding="utf-8")
    package = load_package(root, source="community")
    assert package.state is PackageState.FAILED
    [diagnostic] = package.diagnostics
    assert diagnostic.code == "frontmatter-yaml" and "`2024-13-45` is not a valid timestamp" in diagnostic.message
    assert "line 3" in diagnostic.message  # the file's line: the frontmatter starts on line 2


def test_dates_and_typed_scalars_that_are_valid_still_load() -> None:
    assert load_yaml("a: 2024-02-29\nb: !!int '7'\nc: !!float '1.5'\nd: !!bool 'yes'") == {
        "a": datetime.date(2024, 2, 29), "b": 7, "c": 1.5, "d": True,
    }


async def test_installing_an_installed_package_again_names_no_host_folder(tmp_path: Path) -> None:
    community = tmp_path / "community"
    running, client = await started_registry([community], builtin_dirs=[REPO_ROOT / "plugins"])
    try:
        package = zip_folder(REPO_ROOT / "tests" / "registry" / "fixtures" / "good" / "journal")
        assert (await client.stub.InstallPackage(registry_pb2.InstallPackageRequest(zip=package), timeout=30)).ok
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await client.stub.InstallPackage(registry_pb2.InstallPackageRequest(zip=package), timeout=30)
    finally:
        await client.close()
        await running.stop(0)  # type: ignore[attr-defined]
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert raised.value.details() == "`journal` is already installed; set replace to overwrite it"

"""Each service's README names every RPC of its proto, its settings section, and (store) every table."""

from __future__ import annotations

import re

import pytest

from services.store.models import Base
from shared.settings import REPO_ROOT

SERVICES = ("registry", "scheduler", "hooks", "gateway", "store")


def readme(service: str) -> str:
    return (REPO_ROOT / "services" / service / "README.md").read_text(encoding="utf-8")


def rpcs_of(service: str) -> list[str]:
    proto = (REPO_ROOT / "protos" / "covel" / service / "v1" / f"{service}.proto").read_text(encoding="utf-8")
    return re.findall(r"^\s*rpc\s+(\w+)\s*\(", proto, flags=re.MULTILINE)


@pytest.mark.parametrize("service", SERVICES)
def test_the_readme_names_every_rpc_of_the_service(service: str) -> None:
    text = readme(service)
    missing = [rpc for rpc in rpcs_of(service) if f"`{rpc}`" not in text]
    assert not missing, f"services/{service}/README.md does not describe {', '.join(missing)}"


@pytest.mark.parametrize("service", SERVICES)
def test_the_readme_links_its_settings(service: str) -> None:
    assert f"docs/settings.md#{service})" in readme(service)
    assert f"\n## {service}\n" in (REPO_ROOT / "docs" / "settings.md").read_text(encoding="utf-8")


def test_the_store_readme_names_every_table() -> None:
    text = readme("store")
    missing = [table for table in Base.metadata.tables if f"| `{table}` |" not in text]
    assert not missing, f"services/store/README.md does not list the tables {', '.join(missing)}"


def test_the_docs_never_point_at_the_reference_folder_outside_the_repo() -> None:
    pages = [*(REPO_ROOT / "docs").glob("*.md"), *(REPO_ROOT / "services").glob("*/README.md")]
    pointing = [str(page.relative_to(REPO_ROOT)) for page in pages if "shared/spec" in page.read_text(encoding="utf-8")]
    assert not pointing, f"{', '.join(pointing)} point at shared/spec, which is not part of the repo: explain it in docs/ instead"

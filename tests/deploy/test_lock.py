"""deploy/requirements.lock: the image's dependencies pinned with their files' hashes (`make lock`), and the
Dockerfile installs exactly that, nothing resolved at build time."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from shared.settings import REPO_ROOT

LOCK = REPO_ROOT / "deploy" / "requirements.lock"
PINNED = re.compile(r"^([A-Za-z0-9._-]+)==([^\s\\]+)")


def pinned() -> dict[str, tuple[str, int]]:
    """name -> (version, how many hashes)."""
    found: dict[str, tuple[str, int]] = {}
    current = ""
    for line in LOCK.read_text().splitlines():
        if match := PINNED.match(line):
            current = canonicalize_name(match.group(1))
            found[current] = (match.group(2), 0)
        elif line.strip().startswith("--hash=sha256:") and current:
            version, hashes = found[current]
            found[current] = (version, hashes + 1)
        elif line.strip().startswith("--") and not line.strip().startswith("--hash"):
            raise AssertionError(f"requirements.lock names an index or a folder ({line.strip()}): `make lock` leaves them out")
    return found


def test_every_project_dependency_is_pinned_within_its_range_with_hashes():
    locked = pinned()
    dependencies = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dependency in map(Requirement, dependencies):
        name = canonicalize_name(dependency.name)
        assert name in locked, f"{dependency.name} is not in deploy/requirements.lock: run `make lock`"
        version, _ = locked[name]
        assert dependency.specifier.contains(version, prereleases=True), f"{name}=={version} is outside {dependency.specifier}: run `make lock`"
    assert all(hashes > 0 for _, hashes in locked.values()), [name for name, (_, hashes) in locked.items() if not hashes]


def test_the_image_installs_the_lock_with_its_hashes():
    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile").read_text()
    assert "pip install --require-hashes --no-deps -r /tmp/requirements.lock" in dockerfile
    assert "COPY deploy/requirements.lock" in dockerfile

"""Fixtures shared by every test area."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile

import pytest

from tests.support import file_order

POSTGRES_URL = os.environ.get("COVEL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
# Under pytest-xdist (`make test` runs `-n 2`) each worker has a database of its own in that server
# (`test_gw0`, ...), made by pytest_configure below: the workers' schemas and connections never meet.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")

# Probe plugins of the suite report through files (in the data dir they find in COVEL_DATA_DIR, or in
# tmp_path): unless a test says otherwise, their sandbox workers keep those folders, that variable and
# the service's uid; they still run in worker processes, in their namespaces, with the limits and the
# kills (docs/security.md, "Plugin sandbox"). SHIPPED_SANDBOX is the sandbox as it ships, for
# tests/security/test_plugin_sandbox.py and tests/sandbox.
OBSERVABLE_SANDBOX = {
    "COVEL_SANDBOX_HIDE_DIRS": "false",
    "COVEL_SANDBOX_DROP_PRIVILEGES": "false",
    "COVEL_SANDBOX_PASS_ENV": "COVEL_DATA_DIR,EVENT_KEY_PROBE_SLEEP_S",
}
SHIPPED_SANDBOX = {"COVEL_SANDBOX_HIDE_DIRS": "true", "COVEL_SANDBOX_DROP_PRIVILEGES": "true", "COVEL_SANDBOX_PASS_ENV": ""}
for _name, _value in OBSERVABLE_SANDBOX.items():
    os.environ.setdefault(_name, _value)
# A covel.env in the checkout (what `covel onboard` writes) must not change what the suite runs against.
os.environ.setdefault("COVEL_CONFIG_FILE", os.devnull)
# One validation cache (services/registry/validation_cache.py) for every registry the run starts, so
# the ~170 groups do not each validate the same unchanged packages again; made here (before
# pytest-xdist starts its workers, which inherit it) and removed at the end of the run.
_OWN_REGISTRY_CACHE = "" if "COVEL_REGISTRY_CACHE_DIR" in os.environ else tempfile.mkdtemp(prefix="covel-registry-cache-")
if _OWN_REGISTRY_CACHE:
    os.environ["COVEL_REGISTRY_CACHE_DIR"] = _OWN_REGISTRY_CACHE


def _worker_database_url(url: str, worker: str) -> str:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.set(database=f"{parsed.database}_{worker}").render_as_string(hide_password=False)


def _ensure_worker_database(url: str, worker_url: str) -> bool:
    """Create this worker's database (once: it is kept for the next run) in the server of `url`.
    False when the server cannot be reached or refuses: the worker then uses `url` itself."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    name = make_url(worker_url).database
    engine = create_engine(url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as connection:
            exists = connection.execute(text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}).first()
            if exists is None:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
        return True
    except SQLAlchemyError:
        return False
    finally:
        engine.dispose()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--record-file-durations", action="store_true",
                     help="write each test file's time in this run to tests/file_durations.json (the order make test runs files in)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = file_order.longest_first(items, file_order.recorded())


def pytest_configure(config: pytest.Config) -> None:
    global POSTGRES_URL
    if config.getoption("record_file_durations"):
        config.pluginmanager.register(file_order.FileDurations(), "file-durations")
    # Every ServiceGroup of the suite forks its services from fork servers that imported them once
    # (covel_cli/service_forks.py): the ~110 group starts of a run skip ~5 s of imports each.
    from covel_cli import service_forks
    from shared.settings import REPO_ROOT

    service_forks.enable(REPO_ROOT)
    if XDIST_WORKER:
        worker_url = _worker_database_url(POSTGRES_URL, XDIST_WORKER)
        if _ensure_worker_database(POSTGRES_URL, worker_url):
            POSTGRES_URL = worker_url


def pytest_unconfigure(config: pytest.Config) -> None:
    if _OWN_REGISTRY_CACHE:
        shutil.rmtree(_OWN_REGISTRY_CACHE, ignore_errors=True)


def free_addr() -> str:
    """A loopback address with a port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def addr() -> str:
    return free_addr()

"""Typed settings from environment variables, one model per service.

Every service reads `COVEL_<SERVICE>_ADDR` for where it listens and where its peers are,
so the same variables serve `covel up`, tests and a Kubernetes ConfigMap.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent

DEFAULT_ADDRS = {
    "registry": "127.0.0.1:50151",
    "hooks": "127.0.0.1:50152",
    "gateway": "127.0.0.1:50153",
    "store": "127.0.0.1:50154",
    "scheduler": "127.0.0.1:50150",
}


class PeerAddresses(BaseSettings):
    """Where each service listens; a service binds its own and dials the others."""

    model_config = SettingsConfigDict(env_prefix="COVEL_", extra="ignore")

    registry_addr: str = DEFAULT_ADDRS["registry"]
    hooks_addr: str = DEFAULT_ADDRS["hooks"]
    gateway_addr: str = DEFAULT_ADDRS["gateway"]
    store_addr: str = DEFAULT_ADDRS["store"]
    scheduler_addr: str = DEFAULT_ADDRS["scheduler"]

    def addr_of(self, service: str) -> str:
        return getattr(self, f"{service}_addr")


class ServiceSettings(PeerAddresses):
    """Settings every service has."""

    log_level: str = "info"
    # "json" for one JSON object a line (clusters), "console" for people.
    log_format: str = "json"
    # Seconds in-flight RPCs get to finish after SIGTERM.
    shutdown_grace_s: float = 10.0


def default_data_dir() -> Path:
    return Path.cwd() / ".covel"


def default_plugin_dirs() -> list[Path]:
    return [REPO_ROOT / "plugins"]


class DataDirSetting(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="COVEL_", extra="ignore")
    data_dir: Path = Field(default_factory=default_data_dir)

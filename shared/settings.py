"""Typed settings from environment variables, one model per service.

Every service reads `COVEL_<SERVICE>_ADDR` for where it listens and where its peers are,
so the same variables serve `covel up`, tests and a Kubernetes ConfigMap.

Every settings class derives from CovelSettings: besides the environment it reads the config file
(`COVEL_CONFIG_FILE`, default `covel.env` in the working directory; KEY=VALUE lines, dotenv format,
written by `covel onboard`). The environment wins over the file; a missing file is no error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, DotEnvSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
# Where the config file is: an environment variable only (the file cannot say where it is itself).
CONFIG_FILE_VARIABLE = "COVEL_CONFIG_FILE"
DEFAULT_CONFIG_FILE = "covel.env"


def config_file() -> Path:
    """The config file every settings class reads: COVEL_CONFIG_FILE, else `covel.env` in the working directory."""
    return Path(os.environ.get(CONFIG_FILE_VARIABLE) or DEFAULT_CONFIG_FILE).expanduser()


class CovelSettings(BaseSettings):
    """COVEL_* settings: the environment first, then the config file (config_file()), then the defaults."""

    model_config = SettingsConfigDict(env_prefix="COVEL_", extra="ignore", env_file_encoding="utf-8")

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file is looked up when a settings object is made, so COVEL_CONFIG_FILE may change in between (tests).
        config = DotEnvSettingsSource(settings_cls, env_file=config_file())
        return init_settings, env_settings, config, file_secret_settings

DEFAULT_ADDRS = {
    "registry": "127.0.0.1:50151",
    "hooks": "127.0.0.1:50152",
    "gateway": "127.0.0.1:50153",
    "store": "127.0.0.1:50154",
    "scheduler": "127.0.0.1:50150",
}


class PeerAddresses(CovelSettings):
    """Where each service listens; a service binds its own and dials the others."""

    registry_addr: str = DEFAULT_ADDRS["registry"]
    hooks_addr: str = DEFAULT_ADDRS["hooks"]
    gateway_addr: str = DEFAULT_ADDRS["gateway"]
    store_addr: str = DEFAULT_ADDRS["store"]
    scheduler_addr: str = DEFAULT_ADDRS["scheduler"]

    def addr_of(self, service: str) -> str:
        return getattr(self, f"{service}_addr")


class SecuritySettings(CovelSettings):
    """Bearer token of the client API and TLS between services (shared/security)."""

    # The scheduler's client API requires `authorization: Bearer <token>` when a token is set,
    # given as the value or as a file (a mounted Kubernetes Secret); the covel CLI sends it.
    api_token: SecretStr | None = None
    api_token_file: Path | None = None
    # This process's certificate chain and key (PEM): servers serve TLS with them, clients
    # present them. With a CA, servers require client certificates signed by it (mTLS) and
    # clients verify servers against it.
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_ca_file: Path | None = None
    # With a CA: whether this server refuses clients without a certificate. `false` suits a
    # scheduler whose public clients authenticate with the bearer token instead.
    tls_require_client_cert: bool = True
    # The name checked against servers' certificates when the address' host is not in them.
    tls_server_name: str = ""
    # Listen without TLS while the channels to peers still present the certificate: `covel up`'s
    # scheduler on loopback, whose public clients prove themselves with the bearer token.
    tls_listen_plaintext: bool = False
    # A plaintext port that serves only the gRPC health service, for probes that cannot speak
    # TLS (the kubelet's gRPC probe): one for every service, or one per service (which wins).
    health_port: int | None = None
    registry_health_port: int | None = None
    hooks_health_port: int | None = None
    gateway_health_port: int | None = None
    store_health_port: int | None = None
    scheduler_health_port: int | None = None

    @field_validator("api_token_file", "tls_cert_file", "tls_key_file", "tls_ca_file", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        """An empty value unsets a file a shared ConfigMap names (the web front presents no certificate)."""
        return None if value == "" else value

    def health_port_of(self, service: str) -> int | None:
        own = getattr(self, f"{service}_health_port", None)
        return own if own is not None else self.health_port


def default_oidc_algorithms() -> list[str]:
    return ["RS256", "ES256"]


class PrincipalSettings(SecuritySettings):
    """Who may call the scheduler's client API, as whom (shared/security/principals.py)."""

    # YAML or JSON `users: [{principal, token | token_sha256, roles}]`: one token per person.
    api_users_file: Path | None = None
    # JWTs of an OIDC issuer: its `iss`, the `aud` tokens must carry, and where its keys are
    # (empty: the jwks_uri of <issuer>/.well-known/openid-configuration).
    oidc_issuer: str = ""
    oidc_audience: str = ""
    oidc_jwks_url: str = ""
    # The claims naming the principal and listing its roles (player, operator; others ignored).
    oidc_principal_claim: str = "sub"
    oidc_roles_claim: str = "roles"
    # Signature algorithms accepted; asymmetric ones only (the scheduler holds no shared secret).
    oidc_algorithms: Annotated[list[str], NoDecode] = Field(default_factory=default_oidc_algorithms)

    @field_validator("oidc_algorithms", mode="before")
    @classmethod
    def _split_algorithms(cls, value: Any) -> Any:
        return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value


class TelemetrySettings(CovelSettings):
    """Tracing and metrics (shared/telemetry); everything off by default."""

    # populate_by_name: settings given in code name the field (traces_exporter=…), not its env alias.
    model_config = SettingsConfigDict(populate_by_name=True)

    # `none`, `otlp` (OTEL_EXPORTER_OTLP_* say where and how: http/protobuf or grpc), `console`;
    # several separated by commas. OTEL_TRACES_EXPORTER is read too.
    traces_exporter: str = Field("none", validation_alias=AliasChoices("COVEL_TRACES_EXPORTER", "OTEL_TRACES_EXPORTER"))
    # Prometheus /metrics: a port for every service, or one per service (which wins). Unset: off.
    metrics_port: int | None = None
    registry_metrics_port: int | None = None
    hooks_metrics_port: int | None = None
    gateway_metrics_port: int | None = None
    store_metrics_port: int | None = None
    scheduler_metrics_port: int | None = None
    # Where /metrics listens; empty: the host of the service's own gRPC address.
    metrics_host: str = ""

    def metrics_port_of(self, service: str) -> int | None:
        own = getattr(self, f"{service}_metrics_port", None)
        return own if own is not None else self.metrics_port


class ServiceSettings(PeerAddresses, SecuritySettings, TelemetrySettings):
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


class DataDirSetting(CovelSettings):
    data_dir: Path = Field(default_factory=default_data_dir)

"""Settings of the plugin sandbox (COVEL_SANDBOX_*): the same for every service that runs plugin code."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from shared.settings import CovelSettings


class SandboxSettings(CovelSettings):
    # Plugin code (entry modules, hooks, tools, handlers, guards, the registry's probe) runs in worker
    # processes. `false` runs it inside the service, for debugging only: it then reaches every secret.
    # Builtin and community code get the same workers and the same isolation (no network, nothing inherited, their
    # own /tmp): no setting exempts builtins, so a builtin reaches nothing a community plugin cannot. Trust decides
    # only when code loads (a community plugin's once a session approved it), never what it reaches.
    sandbox_enabled: bool = True
    # A service running as root starts its workers as this uid and gid (nobody), with no new privileges.
    sandbox_drop_privileges: bool = True
    sandbox_uid: int = 65534
    sandbox_gid: int = 65534
    # Private PID and mount namespaces (their own /proc) where the kernel allows.
    sandbox_namespaces: bool = True
    # With the namespaces: an empty tmpfs over the data dir and /tmp (never over the Python install).
    sandbox_hide_dirs: bool = True
    # Environment variables passed to workers (none by default; tests that observe plugin code name theirs).
    sandbox_pass_env: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Per worker: address space, CPU seconds over its life (past them it is replaced), open files, and
    # processes and threads of the sandbox uid on the machine (only set when dropping to it).
    sandbox_memory_mb: int = Field(2048, ge=64)
    sandbox_cpu_s: int = Field(3600, ge=1)
    sandbox_open_files: int = Field(256, ge=16)
    sandbox_processes: int = Field(4096, ge=16)
    # How long a worker has to confirm a cancelled call's stop before it counts as hung and is killed.
    sandbox_stop_grace_ms: int = Field(250, ge=10)
    # How long a new worker may take to start (isolation and imports).
    sandbox_start_timeout_s: float = Field(20.0, gt=0)
    # Workers have a network namespace of their own (no route anywhere); `false` only where the kernel forbids one.
    sandbox_network_isolation: bool = True
    # covel.http / ctx.http, sent by the host: origins (scheme://host:port) whose requests may reach loopback,
    # private, link-local or metadata addresses (still only when permissions.http declares them). Empty: none.
    sandbox_http_allow_private_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Bounds of one request: its body, the response's (decoded) body, the time of all its hops; and per plugin,
    # the requests in flight at once.
    sandbox_http_max_request_bytes: int = Field(1024 * 1024, ge=0)
    sandbox_http_max_response_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    sandbox_http_timeout_s: float = Field(30.0, gt=0)
    sandbox_http_concurrency: int = Field(8, ge=1)
    # Plugin log lines (covel.log, ctx.log, print): per plugin, lines a second and burst, and each line's size.
    sandbox_log_lines_per_s: float = Field(50.0, gt=0)
    sandbox_log_burst: int = Field(200, ge=1)
    sandbox_log_line_bytes: int = Field(4096, ge=128)

    @field_validator("sandbox_pass_env", "sandbox_http_allow_private_origins", mode="before")
    @classmethod
    def _split_names(cls, value: Any) -> Any:
        return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value

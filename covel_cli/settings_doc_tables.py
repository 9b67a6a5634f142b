"""docs/settings.md's tables: one per settings model (`settings:<service>`, `shared` for what every
service reads), each variable with its type, default and meaning.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource

from covel_cli.table_cells import SCALARS, MissingMeaning, constrained, literal
from services.gateway.settings import GatewaySettings
from services.hooks.settings import HooksSettings
from services.registry.settings import RegistrySettings, default_pack_files, default_world_dirs
from services.scheduler.settings import SchedulerSettings
from services.store.settings import StoreSettings
from services.web.settings import WebSettings
from shared.sandbox.settings import SandboxSettings
from shared.settings import ServiceSettings, default_data_dir, default_oidc_algorithms, default_plugin_dirs

# ----- settings --------------------------------------------------------------------------------

# One table per settings model; a service's table lists what it adds to the shared settings.
SETTINGS_MODELS: dict[str, type[BaseSettings]] = {
    "shared": ServiceSettings,
    "registry": RegistrySettings,
    "scheduler": SchedulerSettings,
    "hooks": HooksSettings,
    "gateway": GatewaySettings,
    "store": StoreSettings,
    "sandbox": SandboxSettings,
    "web": WebSettings,
}
# Defaults computed at start, by the factory's name.
FACTORY_DEFAULTS: dict[str, str] = {
    default_data_dir.__name__: "`./.covel` (in the working directory)",
    default_plugin_dirs.__name__: "the repository's `plugins/`",
    default_world_dirs.__name__: "the repository's `worlds/`",
    default_pack_files.__name__: "the repository's `packs/builtin.yaml`",
    default_oidc_algorithms.__name__: "`RS256,ES256`",
    "_instance_id": "`<host name>-<8 hex digits>`",
    "dict": "(empty)",
    "list": "(empty)",
}
SETTING_TYPES: dict[Any, str] = {"Path": "path", "SecretStr": "secret string", "dict": "JSON object"}

SETTING_MEANINGS: dict[str, str] = {
    # shared/sandbox/settings.py: every service that runs plugin code (hooks, scheduler, registry probe)
    "sandbox_enabled": "Plugin code runs in sandbox worker processes; `false` runs it inside the service (debugging only: it then reaches every secret).",
    "sandbox_drop_privileges": "A service running as root starts its workers as `COVEL_SANDBOX_UID`/`GID`, with no new privileges.",
    "sandbox_uid": "The uid workers run as when privileges are dropped (nobody).",
    "sandbox_gid": "The gid workers run as when privileges are dropped.",
    "sandbox_namespaces": "Private PID, mount and network namespaces (their own `/proc`, no network) where the kernel allows.",
    "sandbox_hide_dirs": "With the namespaces: an empty tmpfs over the data dir, `/tmp`, `/run` and `/dev/shm` (Python's own folders below them bound back read-only).",
    "sandbox_pass_env": "Environment variables passed to workers, comma-separated (none by default; every other variable is dropped).",
    "sandbox_memory_mb": "A worker's address-space limit.",
    "sandbox_cpu_s": "A worker's CPU seconds over its life; past them it is replaced.",
    "sandbox_open_files": "A worker's open-file limit.",
    "sandbox_processes": "Processes and threads of the sandbox uid (set only when dropping to it).",
    "sandbox_stop_grace_ms": "How long a worker has to confirm a stopped call before it counts as hung and is killed.",
    "sandbox_start_timeout_s": "How long a new worker may take to start (isolation and imports).",
    "sandbox_network_isolation": "Workers get a network namespace of their own (nothing reachable; `covel.http` is sent by the host); `false` shares the service's network with plugin code.",
    "sandbox_http_allow_private_origins": "Origins (`scheme://host:port`, comma-separated) whose `covel.http` requests may reach loopback, private, link-local or metadata addresses, still only when `permissions.http` declares them (a plugin author's local server). Empty: none.",
    "sandbox_http_max_request_bytes": "The largest request body `covel.http` sends for plugin code.",
    "sandbox_http_max_response_bytes": "The largest response body (decoded) `covel.http` takes for plugin code; a larger one fails the request.",
    "sandbox_http_timeout_s": "The time one `covel.http` request of plugin code may take, waiting for its turn included.",
    "sandbox_http_concurrency": "`covel.http` requests of one plugin in flight at once; more wait.",
    "sandbox_log_lines_per_s": "Log lines a plugin (`covel.log`, `ctx.log`, `print`) may write a second on average; past the burst the rest are counted and dropped.",
    "sandbox_log_burst": "Log lines a plugin may write at once before the rate applies.",
    "sandbox_log_line_bytes": "A plugin log line's size; a longer one is cut.",
    # shared: addresses
    "registry_addr": "Where the registry listens and where the others find it.",
    "hooks_addr": "Where the hooks service listens and where the others find it.",
    "gateway_addr": "Where the gateway listens and where the others find it.",
    "store_addr": "Where the store listens and where the others find it.",
    "scheduler_addr": "Where the scheduler listens and where clients find it.",
    # shared: security
    "api_token": "The bearer token the scheduler's client API requires (`authorization: Bearer <token>`); the CLI sends it.",
    "api_token_file": "The same token read from a file (a mounted Secret), whitespace around it dropped; not together with COVEL_API_TOKEN.",
    "tls_cert_file": "This process's certificate chain (PEM): servers serve TLS with it, clients present it.",
    "tls_key_file": "The private key of that certificate (PEM).",
    "tls_ca_file": "The CA peers are checked against: servers then require client certificates (mTLS), clients verify servers.",
    "tls_require_client_cert": "With a CA: refuse clients without a certificate; `false` lets a scheduler's public clients use the token only.",
    "tls_server_name": "The name checked in servers' certificates when the address' host is not in them.",
    "tls_listen_plaintext": "Listen without TLS while channels to peers still present the certificate (`covel up`'s scheduler on loopback).",
    "health_port": "A plaintext port serving only gRPC health, for probes that cannot speak TLS (every service).",
    **{
        f"{service}_health_port": f"The same for the {service} only (wins over COVEL_HEALTH_PORT)."
        for service in ("registry", "hooks", "gateway", "store", "scheduler")
    },
    # shared: telemetry
    "traces_exporter": "`none`, `otlp` (OTEL_EXPORTER_OTLP_* say where) or `console`; several separated by commas.",
    "metrics_port": "Serve Prometheus `/metrics` on this port (every service); unset: off.",
    **{
        f"{service}_metrics_port": f"The same for the {service} only (wins over COVEL_METRICS_PORT)."
        for service in ("registry", "hooks", "gateway", "store", "scheduler")
    },
    "metrics_host": "Where `/metrics` listens; empty: the host of the service's gRPC address.",
    "log_level": "`debug`, `info`, `warning` or `error`.",
    "log_format": "`json` (one object a line) or `console` (for people).",
    "shutdown_grace_s": "Seconds in-flight calls get to finish after SIGTERM.",
    # registry
    "plugin_dirs": "Folders of plugin packages, separated by `:` or `,`, scanned in order (the first of two equal ids wins); folders not in COVEL_BUILTIN_PLUGIN_DIRS hold community plugins.",
    "pack_files": "Files of packs ([docs/worlds.md](worlds.md#plugin-policy-and-packs)), separated by `:` or `,`; the first of two packs with the same id wins.",
    "world_dirs": "Folders of world packages ([docs/worlds.md](worlds.md)), separated by `:` or `,`, scanned in order (the first of two equal ids wins).",
    "registry_cache_dir": "Where validation results of unchanged plugin packages are kept between starts (keyed by the hashes of their files and of the kernel's code); none: `registry-cache` in the data dir.",
    "builtin_plugin_dirs": "The operator's own folders among them: their packages are builtin (`kind: core` counts, code runs unapproved, InstallPackage cannot replace them); every other folder, and so every installed package, is community.",
    # scheduler: principals (docs/security.md, Principals and sessions)
    "api_users_file": "YAML or JSON `users: [{principal, token or token_sha256, roles}]`: one bearer token per person; roles `player` (default), `operator`.",
    "oidc_issuer": "Accept JWTs of this OIDC issuer (its `iss`), verified against its published keys (JWKS).",
    "oidc_audience": "The `aud` those JWTs must carry; required with COVEL_OIDC_ISSUER.",
    "oidc_jwks_url": "Where the issuer's keys are; empty: the `jwks_uri` of `<issuer>/.well-known/openid-configuration`.",
    "oidc_principal_claim": "The JWT claim that names the principal.",
    "oidc_roles_claim": "The JWT claim listing the principal's roles (`player`, `operator`; others ignored; none: `player`).",
    "oidc_algorithms": "JWT signature algorithms accepted, separated by commas; asymmetric ones only.",
    # scheduler
    "scheduler_instance_id": "Names this replica as the holder of turn leases and job claims.",
    "scheduler_lease_ttl_ms": "Turn lease lifetime, renewed every third of it while the turn runs; a crashed scheduler's sessions are playable again within it.",
    "scheduler_lease_wait_ms": "How long a submit to a busy session waits before `ABORTED`.",
    "scheduler_signal_poll_ms": ("How long a running turn waits before it first asks the store for Cancel and Interject sent "
                                 "to another replica; each ask then waits in the store up to 2 s for one."),
    "scheduler_stall_resend_min_ms": "`ctx.gateway`: a silent first send is given up at half the time left, never sooner than this, then sent once more.",
    "scheduler_stream_batch_ms": ("A SubmitActions stream that asked for batches (`batch_events`, docs/api.md): how long a runtime's "
                                  "start or finish, a hook trace entry, progress or a proposal outcome may wait to ride with the "
                                  "next message. Story text never waits."),
    "scheduler_turn_timeout_s": "Upper bound of one turn, all runtimes included.",
    "scheduler_history_max_turns": "Player turns of history story runtimes read when the manifest sets none.",
    "scheduler_history_budget_chars": "History compaction: story log characters since the latest summary past which older turns are folded.",
    "scheduler_history_keep_turns": "History compaction: player turns kept unfolded.",
    "scheduler_max_auto_advance": "Turns a story yielding `continue` may start in a row (`framework.maxAutoAdvance` overrides; 0: off).",
    "instruction_locale": "`en` or `zh`: the language of every session's instructions (PLUGIN.md or PLUGIN.zh.md); empty: the session's locale.",
    "scheduler_detached_workers": "Detached jobs this replica runs at once (0: none here).",
    "scheduler_detached_poll_ms": "How long a detached worker waits before it asks the store's queue again after a failed claim (an idle worker's claim waits in the store until a job is queued).",
    "scheduler_detached_lease_ttl_ms": "A detached job's lease, renewed while it runs.",
    "scheduler_drain_s": "SIGTERM: the whole shutdown (gateway:shutdown hooks, turns and jobs draining, last calls) fits in this.",
    # hooks
    "hooks_registry_wait_s": "How long the hooks service keeps retrying the registry at start.",
    "hooks_fault_threshold": "Hook faults of one plugin within the window that pause its hooks for the session.",
    "hooks_fault_window_s": "The fault breaker's window.",
    # gateway
    "gateway_config": "A YAML file of `providers:` and `slots:`.",
    "gateway_slots": "Per-slot overrides as JSON, e.g. `{\"story\": \"openai:gpt-4o\"}`.",
    "gateway_openai_base_url": "Shortcut for one OpenAI-compatible provider named `openai`: its base URL (`…/v1`).",
    "gateway_openai_model": "Its model; setting it makes `openai` the default slot.",
    "gateway_openai_api_key_env": "The environment variable holding its API key.",
    "gateway_openai_api_key_file": "A file holding its API key, read when that variable is empty.",
    "gateway_openai_embedding_model": "An embedding model of that provider: the `embedding` slot memory-search's vectors come "
                                      "from (unset with a real default slot: memory-search is BM25 alone).",
    "gateway_openai_thinking": "How that provider's models think: empty (they do not), `always`, or `switchable` (a call with "
                               "`agent.reasoning: false` turns it off). While a model thinks, a forced tool choice is sent as `auto`.",
    "gateway_openai_context_window": "That provider's models' context window in tokens (`0`: not known): a request larger than it "
                                     "asks no model and ends as a context overflow (the agent's finalizer then trims it).",
    "gateway_openai_thinking_off": "JSON request fields a call that turns thinking off adds (switchable; default "
                                   "`{\"reasoning_effort\": \"minimal\"}`).",
    "gateway_script": "A YAML file of per-slot reply queues and rules for the offline scripted model.",
    "gateway_scripted_chunk_delay_ms": "Delay between the scripted model's streamed chunks.",
    "gateway_max_attempts": "HTTP attempts of one logical call, retries and fallbacks together.",
    "gateway_call_budget_s": "Seconds one logical call may take, retries and fallbacks together.",
    "gateway_max_retries": "maxRetries when the request leaves it unset.",
    "gateway_attempts_per_model": "429/5xx answers one model gets before the next fallback is tried.",
    "gateway_retry_base_ms": "First retry delay (doubling, honouring `Retry-After`).",
    "gateway_retry_max_ms": "Longest retry delay.",
    "gateway_call_timeout_ms": "One attempt's time limit when the request sets none.",
    "gateway_first_token_timeout_ms": "A streamed attempt's wait for its first token; 0: derived from the budget.",
    "gateway_idle_timeout_ms": "A streamed attempt's longest silence between chunks.",
    "gateway_connect_timeout_ms": "Connecting to a provider.",
    # web
    "web_addr": "Where the player page and the HTTP/JSON API listen (`covel up` starts it there).",
    "web_call_timeout_s": "How long a unary call to the scheduler may take before the API answers 504.",
    "web_metrics_port": "Where the web front's /metrics listens (else `COVEL_METRICS_PORT`); unset: no metrics.",
    "web_oidc_client_id": "The page's client id at the OIDC issuer (`COVEL_OIDC_ISSUER`): the sign-in form then offers the issuer's own "
                          "page (authorization code with PKCE; docs/web.md \"Signing in\"). Empty: the token form only.",
    "web_oidc_scope": "The scope the page asks the issuer for.",
    "web_oidc_token": "Which of the issuer's tokens the page sends as its bearer token: `id_token` (set `COVEL_OIDC_AUDIENCE` to the "
                      "client id) or `access_token` (a JWT for the API).",
    # store
    "data_dir": "Local data: the default SQLite database (and `covel up`'s logs).",
    "store_database_url": "SQLAlchemy URL; empty: SQLite at `<COVEL_DATA_DIR>/covel.db`. PostgreSQL: `postgresql+psycopg://user@host:5432/db`.",
    "store_database_schema": "PostgreSQL only: keep every table in this schema (created if missing).",
    "store_pool_size": "Database connections kept open (and threads running queries).",
    "store_lock_timeout_ms": "How long a write waits for another writer's lock before `UNAVAILABLE`.",
    "store_default_lease_ttl_ms": "Turn lease lifetime when a caller passes `ttl_ms = 0`.",
    "store_restart_lease_grace_ms": "At start, every turn lease is cut to end within this: a holder that died meanwhile blocks its session no longer.",
    "store_migrate": "`on-start`: the store migrates its database when it starts; `check`: it only checks the schema and refuses to start otherwise (Kubernetes migrates in the store's init container, `covel-service store-migrate`).",
    "store_readiness_interval_s": "How often the store checks its database answers; its health is NOT_SERVING (not ready) while it does not.",
    "store_detached_max_attempts": "Attempts of a detached job failing for passing reasons before it is parked.",
    "store_detached_retry_base_ms": "Backoff before a detached job's second attempt, doubling per attempt.",
    "store_detached_retry_max_ms": "Longest backoff between a detached job's attempts.",
    "store_detached_max_per_session": "Back-pressure: a session's turn waits (then `RESOURCE_EXHAUSTED`) while it has this many detached jobs queued or running.",
    "store_detached_max_total": "Back-pressure: every turn waits (then `RESOURCE_EXHAUSTED`) while the whole queue holds this many jobs.",
}


def settings_fields(service: str) -> dict[str, FieldInfo]:
    """The fields a service adds to the shared ones; for `shared`, in the order its bases declare them."""
    model = SETTINGS_MODELS[service]
    if service != "shared":
        return {name: info for name, info in model.model_fields.items() if name not in ServiceSettings.model_fields}
    declared = [name for cls in (*model.__bases__, model) for name in vars(cls).get("__annotations__", {})]
    return {name: model.model_fields[name] for name in declared if name in model.model_fields}


def env_names(model: type[BaseSettings], name: str, info: FieldInfo) -> list[str]:
    """The environment variables pydantic-settings reads for the field, upper-cased, first the preferred."""
    found = EnvSettingsSource(model)._extract_field_info(info, name)
    return list(dict.fromkeys(env_name.upper() for _, env_name, _ in found))


def setting_type(info: FieldInfo) -> str:
    tp = info.annotation
    args = [arg for arg in typing.get_args(tp) if arg is not type(None)] if typing.get_origin(tp) in (Union, types.UnionType) else [tp]
    base = args[0]
    origin = typing.get_origin(base)
    if origin is Literal:
        text = "one of " + "\\|".join(f"`{value}`" if value else "(empty)" for value in typing.get_args(base))
    elif origin is list:
        text = f"list of {SETTING_TYPES.get(typing.get_args(base)[0].__name__, 'string')}s"
    elif origin is dict:
        text = SETTING_TYPES["dict"]
    else:
        text = SETTING_TYPES.get(getattr(base, "__name__", ""), SCALARS.get(base, str(base)))
    return constrained(text, list(info.metadata))


def setting_default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return FACTORY_DEFAULTS[info.default_factory.__name__]
    value = info.default
    if value is None:
        return "(unset)"
    if value == "":
        return "(empty)"
    return f"`{literal(value)}`" if not isinstance(value, dict) else f"`{value or '{}'}`"


def settings_table(service: str) -> str:
    model = SETTINGS_MODELS[service]
    rows = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for name, info in settings_fields(service).items():
        if name not in SETTING_MEANINGS:
            raise MissingMeaning(f"{model.__name__}.{name}: add its meaning to SETTING_MEANINGS in covel_cli/settings_doc_tables.py")
        variables = ", ".join(f"`{env}`" for env in env_names(model, name, info))
        rows.append(f"| {variables} | {setting_type(info)} | {setting_default(info)} | {SETTING_MEANINGS[name]} |")
    return "\n".join(rows) + "\n"

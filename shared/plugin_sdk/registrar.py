"""The `covel` object an entry module's `register(covel)` receives."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.hook_events import DEFAULT_HOOK_TIMEOUT_MS, ENFORCE_GROUPS, EVENTS_BY_NAME
from shared.plugin_sdk.event_keys import DEFAULT_EVENT_HANDLER_TIMEOUT_MS, KEY_PATTERN, subscription_warning
from shared.plugin_sdk.hook_match import DeclarativeMatch, MatchError
from shared.plugin_sdk.http_client import PluginHttpClient
from shared.plugin_sdk.plugin_log import PluginLog


class RegistrationError(ValueError):
    """A call to the registrar that can never work (unknown event, bad option)."""


# Action names with these prefixes are the framework's own (approvals, runtime and event requests).
RESERVED_ACTION_PREFIXES = ("covel:", "runtime:", "event:")
SERVICE_ACCESS = ("read", "write")


@dataclass(frozen=True, slots=True)
class HookRegistration:
    plugin_id: str
    event: str
    handler: Callable[..., Any]
    # A function (run where the handler runs) or a DeclarativeMatch (tested before the event is sent).
    match: Callable[[Any], bool] | DeclarativeMatch | None
    timeout_ms: int
    enforce: str
    # Position among all of this plugin's registrations, for the "registration order" rule.
    order: int
    # An `async def` handler runs on the event loop; any other in a plugin thread (shared/plugin_threads.py).
    is_async: bool = False
    # The handler is a sandbox worker's (services/hooks/sandboxed_entries.py): it gets the payload as it is
    # (it is copied on its way to the worker) and its overrun is stopped there.
    sandboxed: bool = False
    # observe=True: it only watches; what it returns changes nothing, and the kernel may deliver it later in the turn.
    observe: bool = False


@dataclass(frozen=True, slots=True)
class EventKeyRegistration:
    """covel.on_event: a handler of a gateway event key or family (shared/plugin_sdk/event_keys.py)."""

    plugin_id: str
    key: str
    handler: Callable[..., Any]
    timeout_ms: int
    # Why the kernel never emits this key (unknown or custom); None for known keys and families.
    warning: str | None


@dataclass(frozen=True)
class ToolRegistration:
    plugin_id: str
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[..., Any]
    read_only: bool


@dataclass(frozen=True)
class RpcRegistration:
    plugin_id: str
    action: str
    handler: Callable[..., Any]
    description: str


@dataclass(frozen=True)
class ServiceRegistration:
    plugin_id: str
    contract: str
    # A callable, or an object whose methods are the service's operations.
    implementation: Any
    model_facing: bool
    access: str


@dataclass(frozen=True)
class ExtensionRegistration:
    plugin_id: str
    point: str
    id: str
    provider: Callable[..., Any]
    order: int
    slot: str | None

    @property
    def key(self) -> str:
        """`<point>/<id>`, as contributes.extensions writes it."""
        return f"{self.point}/{self.id}"


@dataclass(frozen=True)
class FormValidatorRegistration:
    plugin_id: str
    form_id: str
    validator: Callable[..., Any]


@dataclass
class PluginRegistrar:
    plugin_id: str
    hooks: list[HookRegistration] = field(default_factory=list)
    tools: list[ToolRegistration] = field(default_factory=list)
    rpcs: list[RpcRegistration] = field(default_factory=list)
    services: list[ServiceRegistration] = field(default_factory=list)
    extensions: list[ExtensionRegistration] = field(default_factory=list)
    forms: list[FormValidatorRegistration] = field(default_factory=list)
    event_handlers: list[EventKeyRegistration] = field(default_factory=list)
    # Objects with @hookimpl methods (Python hookspecs); the hooks service maps them onto events.
    hookimpl_objects: list[Any] = field(default_factory=list)
    # (where, entry) of the package's permissions.http, root and runtimes: what covel.http may reach.
    http_permissions: tuple[tuple[str, Any], ...] = ()

    @functools.cached_property
    def http(self) -> PluginHttpClient:
        """covel.http: an httpx client limited to the origins and methods of permissions.http."""
        return PluginHttpClient(self.plugin_id, self.http_permissions)

    @functools.cached_property
    def log(self) -> PluginLog:
        """covel.log: the plugin's log lines (shared/plugin_sdk/plugin_log.py)."""
        return PluginLog(self.plugin_id)

    def on(
        self,
        event: str,
        handler: Callable[..., Any],
        *,
        match: Callable[[Any], bool] | Mapping[str, Any] | DeclarativeMatch | None = None,
        timeout_ms: int = DEFAULT_HOOK_TIMEOUT_MS,
        enforce: str = "normal",
        observe: bool = False,
    ) -> None:
        """Handle a hook event. `match`: a function of the payload, or a dict of {path: value(s)} that the
        kernel tests before sending the event (shared/plugin_sdk/hook_match.py). `observe=True`: the handler
        only watches (it cannot block or replace anything), so the kernel may gather the event with others
        and deliver it later in the same turn, costing no call of its own."""
        if event not in EVENTS_BY_NAME:
            raise RegistrationError(f"covel.on({event!r}): unknown hook event; use one of {', '.join(EVENTS_BY_NAME)}")
        if enforce not in ENFORCE_GROUPS:
            raise RegistrationError(f"covel.on({event!r}, enforce={enforce!r}): enforce is pre, normal or post")
        if not callable(handler):
            raise RegistrationError(f"covel.on({event!r}): the handler is not callable")
        if not isinstance(timeout_ms, int) or timeout_ms <= 0:
            raise RegistrationError(f"covel.on({event!r}, timeout_ms={timeout_ms!r}): a positive number of milliseconds")
        if not isinstance(observe, bool):
            raise RegistrationError(f"covel.on({event!r}, observe={observe!r}): observe is True or False")
        if match is not None and not callable(match) and not isinstance(match, DeclarativeMatch):
            try:
                match = DeclarativeMatch.parse(match)
            except MatchError as error:
                raise RegistrationError(f"covel.on({event!r}, match=…): {error}") from error
        self.hooks.append(
            HookRegistration(self.plugin_id, event, handler, match, timeout_ms, enforce, len(self.hooks),
                             inspect.iscoroutinefunction(handler), observe=observe)
        )

    def on_event(
        self, key: str, handler: Callable[..., Any], *, timeout_ms: int = DEFAULT_EVENT_HANDLER_TIMEOUT_MS
    ) -> None:
        """Subscribe to a gateway event key (`command:new`) or a whole family (`command`).
        An unknown key still registers, with a warning (see `covel hooks info`)."""
        if not isinstance(key, str) or not KEY_PATTERN.match(key):
            raise RegistrationError(f"covel.on_event({key!r}): an event key is lowercase words joined by `:`, e.g. command:new")
        if not callable(handler):
            raise RegistrationError(f"covel.on_event({key!r}): the handler is not callable")
        if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms <= 0:
            raise RegistrationError(f"covel.on_event({key!r}, timeout_ms={timeout_ms!r}): a positive number of milliseconds")
        self.event_handlers.append(EventKeyRegistration(self.plugin_id, key, handler, timeout_ms, subscription_warning(key)))

    def register_hookimpls(self, plugin: Any) -> None:
        """An object (or module) with `@hookimpl` methods in the Python hookspec style
        (before_llm_call, before_tool_call, …); see shared/plugin_sdk/hookspecs.py."""
        if plugin is None or isinstance(plugin, (str, bytes, int, float, bool, dict, list, tuple)):
            raise RegistrationError("covel.register_hookimpls(): give an object whose methods are marked with @hookimpl")
        if any(existing is plugin for existing in self.hookimpl_objects):
            raise RegistrationError(f"covel.register_hookimpls({plugin!r}): registered twice")
        self.hookimpl_objects.append(plugin)

    def register_tool(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        description: str = "",
        parameters: dict[str, Any] | None = None,
        read_only: bool = False,
    ) -> None:
        if any(tool.name == name for tool in self.tools):
            raise RegistrationError(f"covel.register_tool({name!r}): registered twice")
        self.tools.append(
            ToolRegistration(self.plugin_id, name, description, parameters or {"type": "object"}, handler, read_only)
        )

    def register_rpc(self, action: str, handler: Callable[..., Any], *, description: str = "") -> None:
        """An action the plugin answers (`contributes.actions`); commands call actions."""
        if not isinstance(action, str) or not action:
            raise RegistrationError("covel.register_rpc(): the action name must be a non-empty string")
        if action.startswith(RESERVED_ACTION_PREFIXES):
            raise RegistrationError(
                f"covel.register_rpc({action!r}): the prefixes {', '.join(RESERVED_ACTION_PREFIXES)} are reserved for the framework"
            )
        if not callable(handler):
            raise RegistrationError(f"covel.register_rpc({action!r}): the handler is not callable")
        if any(rpc.action == action for rpc in self.rpcs):
            raise RegistrationError(f"covel.register_rpc({action!r}): registered twice")
        self.rpcs.append(RpcRegistration(self.plugin_id, action, handler, description))

    def register_service(self, contract: str, implementation: Any, *, model_facing: bool = False, access: str = "read") -> None:
        """The provider side of a service contract (`contributes.services`)."""
        if not isinstance(contract, str) or "@" not in contract:
            raise RegistrationError(f"covel.register_service({contract!r}): write a versioned contract id such as notes.search@1")
        if access not in SERVICE_ACCESS:
            raise RegistrationError(f"covel.register_service({contract!r}, access={access!r}): access is read or write")
        if implementation is None:
            raise RegistrationError(f"covel.register_service({contract!r}): give the implementation")
        if any(service.contract == contract for service in self.services):
            raise RegistrationError(f"covel.register_service({contract!r}): registered twice")
        self.services.append(ServiceRegistration(self.plugin_id, contract, implementation, model_facing, access))

    def provide_extension(
        self, point: str, id: str, provider: Callable[..., Any], *, order: int = 0, slot: str | None = None
    ) -> None:
        """A provider for a kernel extension point (`contributes.extensions` as `<point>/<id>`)."""
        if not point or not id or "/" in id:
            raise RegistrationError(f"covel.provide_extension({point!r}, {id!r}): give the point and an id without `/`")
        if not callable(provider):
            raise RegistrationError(f"covel.provide_extension({point!r}, {id!r}): the provider is not callable")
        if not isinstance(order, int) or isinstance(order, bool):
            raise RegistrationError(f"covel.provide_extension({point!r}, {id!r}, order={order!r}): order is an integer")
        if any(extension.point == point and extension.id == id for extension in self.extensions):
            raise RegistrationError(f"covel.provide_extension({point!r}, {id!r}): registered twice")
        self.extensions.append(ExtensionRegistration(self.plugin_id, point, id, provider, order, slot))

    def register_form_validator(self, form_id: str, validator: Callable[..., Any]) -> None:
        """Checks a player's answers to a form (`contributes.forms`)."""
        if not isinstance(form_id, str) or not form_id:
            raise RegistrationError("covel.register_form_validator(): the form id must be a non-empty string")
        if not callable(validator):
            raise RegistrationError(f"covel.register_form_validator({form_id!r}): the validator is not callable")
        if any(form.form_id == form_id for form in self.forms):
            raise RegistrationError(f"covel.register_form_validator({form_id!r}): registered twice")
        self.forms.append(FormValidatorRegistration(self.plugin_id, form_id, validator))

    def register_wires(self, *wires: Any, **options: Any) -> None:
        """A Covel provider wire (`contributes.wires`). Refused: this kernel serves no plugin model wires (its model
        calls go to the gateway's own providers, configured by the operator), so the wires are not registered; the rest
        of the package runs. The registry warns at load (`wires-unsupported`)."""
        self.log.warning("covel.register_wires: this kernel serves no plugin model wires; the wires are not registered",
                         wires=len(wires))

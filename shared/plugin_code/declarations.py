"""What an entry module registers against what its contributes declares. Both must agree, both
ways (spec: entry 里的注册和清单里的声明双向核对): the hooks service checks at load, and the
registry checks from a recording run of register(covel) (shared/plugin_code/registration_probe.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.plugin_sdk import PluginRegistrar

# Diagnostic codes of an entry module the registry's probe failed (services/registry/entry_registrations.py);
# the hooks service reports those packages among its load errors too.
ENTRY_LOAD_FAILED_CODE = "entry-load-failed"
ENTRY_REGISTRATIONS_CODE = "entry-registrations"
ENTRY_CODES = frozenset({ENTRY_LOAD_FAILED_CODE, ENTRY_REGISTRATIONS_CODE})

# contributes field -> (registrar call, what a registration is called)
REGISTRATION_CALLS = {
    "tools": ("covel.register_tool", "tool"),
    "actions": ("covel.register_rpc", "action"),
    "services": ("covel.register_service", "service"),
    "extensions": ("covel.provide_extension", "extension"),
    "forms": ("covel.register_form_validator", "form validator"),
}


@dataclass(frozen=True)
class Registrations:
    """Hooks as (event, enforce) pairs, then the names of each other kind of registration."""

    hooks: tuple[tuple[str, str], ...] = ()
    tools: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    services: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()
    forms: tuple[str, ...] = ()

    @classmethod
    def of(cls, registrar: PluginRegistrar) -> Registrations:
        return cls(
            hooks=tuple((hook.event, hook.enforce) for hook in registrar.hooks),
            tools=tuple(tool.name for tool in registrar.tools),
            actions=tuple(rpc.action for rpc in registrar.rpcs),
            services=tuple(service.contract for service in registrar.services),
            extensions=tuple(extension.key for extension in registrar.extensions),
            forms=tuple(form.form_id for form in registrar.forms),
        )

    def to_json(self) -> dict[str, Any]:
        return {name: [list(item) if isinstance(item, tuple) else item for item in getattr(self, name)] for name in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Registrations:
        return cls(
            hooks=tuple((str(event), str(enforce)) for event, enforce in data.get("hooks", [])),
            **{name: tuple(str(item) for item in data.get(name, [])) for name in REGISTRATION_CALLS},
        )


def declaration_problems(declared: Registrations, registered: Registrations, *, skip: frozenset[str] = frozenset()) -> str | None:
    """Every disagreement, joined with "; " (None when they agree). `skip` names kinds not compared
    ("hooks", "tools": what @hookimpl objects add is only known to the hooks service)."""
    problems = []
    if "hooks" not in skip:
        problems.extend(_hook_problems(declared.hooks, registered.hooks))
    for field_name, (call, what) in REGISTRATION_CALLS.items():
        if field_name in skip:
            continue
        names, done = getattr(declared, field_name), getattr(registered, field_name)
        problems.extend(
            f"contributes.{field_name} declares {name} but server code registers no {what} for it ({call})"
            for name in names
            if name not in done
        )
        problems.extend(
            f"{call}({name!r}) is registered but {name} is missing from contributes.{field_name}" for name in done if name not in names
        )
    return "; ".join(problems) or None


def _hook_problems(declared_hooks: tuple[tuple[str, str], ...], registered_hooks: tuple[tuple[str, str], ...]) -> list[str]:
    declared = dict(declared_hooks)
    registered: dict[str, set[str]] = {}
    for event, enforce in registered_hooks:
        registered.setdefault(event, set()).add(enforce)
    problems = []
    for event, enforce in declared.items():
        if event not in registered:
            problems.append(f"contributes.hooks declares {event} but server code registers no handler for it")
        elif registered[event] != {enforce}:
            groups = ", ".join(sorted(registered[event]))
            problems.append(f"{event} is declared with enforce {enforce} but registered with enforce {groups}")
    problems.extend(
        f"covel.on({event!r}) is registered but {event} is missing from contributes.hooks" for event in registered if event not in declared
    )
    return problems

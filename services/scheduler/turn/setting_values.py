"""The player's plugin setting values, checked against what the packages declare before a session
is created (spec: contributes.settings, 玩家配置项, read by runtimes as ctx.userSettings).

A package that declares `contributes.settings` accepts only the keys it declares, each of its
declared type (the rules: shared/plugin_settings.py).

A value that is wrong gets INVALID_ARGUMENT naming `plugin_settings.<pluginId>.<key>`, what the
value must be and what to do; nothing is created. The session-wide `framework` entry takes the
kernel's own settings (maxAutoAdvance, and the execution quotas maxSubagentCalls / maxActors).
A package that declares no settings is not checked here: it reads whatever it was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

from services.scheduler.catalogue import Package
from services.scheduler.execution.subagents import FRAMEWORK, MAX_ACTORS_RANGE, MAX_SUBAGENT_CALLS_RANGE
from shared.errors import invalid_argument
from shared.manifest import Setting
from shared.plugin_settings import value_problem
from shared.structs import from_struct

# The kernel's session settings under plugin_settings["framework"], declared like a plugin's
# (the execution quotas' bounds are the ones subagent_limits applies).
FRAMEWORK_SETTINGS: dict[str, Setting] = {
    "maxAutoAdvance": Setting(key="maxAutoAdvance", type="integer", min=0),
    "maxSubagentCalls": Setting(key="maxSubagentCalls", type="integer", min=MAX_SUBAGENT_CALLS_RANGE[0], max=MAX_SUBAGENT_CALLS_RANGE[1]),
    "maxActors": Setting(key="maxActors", type="integer", min=MAX_ACTORS_RANGE[0], max=MAX_ACTORS_RANGE[1]),
}


def check_plugin_settings(settings: Mapping[str, Any], packages: Mapping[str, Package]) -> None:
    """Raise INVALID_ARGUMENT for the first setting value its package (or the kernel) refuses.

    `settings`: plugin id -> Struct (or dict) of values; `packages`: plugin id -> the package of
    every installed plugin named in `settings`."""
    for plugin_id, values in settings.items():
        given = from_struct(values) if isinstance(values, struct_pb2.Struct) else dict(values)
        if plugin_id == FRAMEWORK:
            declared: Mapping[str, Setting] | None = FRAMEWORK_SETTINGS
            whose = "the kernel's session settings"
        else:
            package = packages.get(plugin_id)
            if package is None:
                raise invalid_argument(
                    f"plugin_settings.{plugin_id}",
                    f"no plugin {plugin_id!r} is installed; remove its settings, or install it and request it",
                )
            declared = package.settings_by_key()
            whose = f"plugin {plugin_id}"
        if declared is None:
            continue
        for key, value in given.items():
            field = f"plugin_settings.{plugin_id}.{key}"
            if key not in declared:
                known = ", ".join(sorted(declared)) or "none"
                raise invalid_argument(field, f"{whose} has no setting {key!r} (it declares: {known}); remove it or fix its name")
            problem = value_problem(declared[key].declaration(), value)
            if problem:
                raise invalid_argument(field, problem)


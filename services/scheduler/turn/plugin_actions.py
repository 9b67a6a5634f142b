"""Plugin actions and players' commands: InvokeAction runs an action a running plugin registered
(covel.register_rpc, declared in contributes.actions) as a turn of origin "action" whose one unit is the
action (`<plugin>/action:<name>`): what the handler proposes commits under the dataset rules like any write.
A command (contributes.commands) is a typed line, `/name arg ...`, parsed by its declaration and sent to its
action with `{args, context}`.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Package
from services.scheduler.execution.origins import TurnOrigin
from services.scheduler.function.execution import FunctionExecution
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.plugin_locale import labels
from services.scheduler.public_api import public_enum
from services.scheduler.turn.state import TurnState
from shared.errors import failed_precondition, invalid_argument, not_found
from shared.ids import new_id
from shared.plugin_sdk.registrar import RESERVED_ACTION_PREFIXES
from shared.structs import to_struct

ACTION_ORIGIN = TurnOrigin.ACTION
COMMAND_CONTEXTS = ("session", "active-runtimes", "models")


@dataclass
class ActionCall:
    plugin_id: str
    action: str
    payload: dict[str, Any]
    # The handler's result as JSON, once it ran (InvokeActionResponse.result_json).
    result_json: str = field(default="null")

    @property
    def unit_id(self) -> str:
        return f"{self.plugin_id}/action:{self.action}"


def check_action(packages: list[Package], plugin_id: str, action: str) -> None:
    """The action is not reserved and a running plugin of the session declares it (before any lease is taken)."""
    if action.startswith(RESERVED_ACTION_PREFIXES):
        raise invalid_argument("action", f"{action!r}: the prefixes {', '.join(RESERVED_ACTION_PREFIXES)} are reserved for the framework")
    package = next((p for p in packages if p.id == plugin_id), None)
    if package is None:
        raise not_found(f"plugin_id: {plugin_id!r} is not running in this session (GetSessionPlugins says which are)",
                        "covel.registry.v1.PluginPackage", plugin_id, reason="PLUGIN_NOT_ACTIVE")
    declared = (package.definition.contributes.actions or []) if package.definition is not None else []
    if action not in declared:
        listed = ", ".join(declared) or "none"
        raise not_found(f"action: plugin {plugin_id} has no action {action!r} (its actions: {listed})", "covel.scheduler.v1.Action",
                        f"{plugin_id}/{action}", reason="ACTION_NOT_FOUND")


async def run_action(hooks: HookBus, call: ActionCall, scope: ExecutionScope, run: TurnState, turn: store_pb2.Turn,
                     functions: FunctionExecution) -> None:
    """The action's handler in the hooks service (its context.world the committed world, as a handler's ctx.world
    reads it); its result on the turn, its proposals with the turn's commit."""
    started = time.monotonic()
    world = await functions.world_view(scope, run.shared)
    reply = await hooks.call_action(scope, call.plugin_id, call.action, json.dumps(call.payload), world=world.as_data())
    result = json.loads(reply.result)
    status, reason = "success", ""
    output: dict[str, Any] = {}
    if result.get("ok"):
        call.result_json = json.dumps(result.get("data"), ensure_ascii=False)
        output = result["data"] if isinstance(result.get("data"), dict) else {"value": result.get("data")}
        run.shared.proposals.extend(
            store_pb2.Proposal(id=new_id(), type=p.type, plugin_id=call.plugin_id, runtime_id=call.unit_id, unit_runtime_id=call.unit_id,
                               payload=p.payload) for p in reply.proposals)
    else:
        error = result.get("error") or {}
        if error.get("code") == "not-found":
            raise not_found(str(error.get("message")), "covel.scheduler.v1.Action", f"{call.plugin_id}/{call.action}",
                            reason="ACTION_ANSWERED_NOT_FOUND")
        if error.get("code") == "unavailable":
            raise failed_precondition(str(error.get("message")), reason="ACTION_UNAVAILABLE", subject=f"actions/{call.plugin_id}/{call.action}")
        status, reason = "failed", f"{error.get('code')}: {error.get('message')}"
    turn.runtime_results.append(store_pb2.RuntimeResult(
        runtime_id=call.unit_id, plugin_id=call.plugin_id, status=status, reason=reason, output=to_struct(output),
        duration_ms=int((time.monotonic() - started) * 1000)))


# -- commands ---------------------------------------------------------------------------------------
def session_commands(packages: list[Package], locale: str = "") -> list[scheduler_pb2.Command]:
    """The commands the running plugins declare whose action they declare too (a malformed entry is left out), their
    label and descriptions in `locale` where the plugin translates them (locales/<locale>.yaml)."""
    commands = []
    for package in packages:
        contributes = package.definition.contributes if package.definition is not None else None
        actions = set(contributes.actions or []) if contributes is not None else set()
        translated = labels(package, locale)
        for index, entry in enumerate((contributes.commands or []) if contributes is not None else []):
            command = _command(entry, package.id, translated, f"contributes.commands[{index}]")
            if command is not None and command.action in actions:
                commands.append(command)
    return sorted(commands, key=lambda c: (c.name, c.plugin_id))


def _command(entry: Any, plugin_id: str, translated: dict[str, str], path: str) -> scheduler_pb2.Command | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(entry.get("action"), str):
        return None

    def text(item: dict, field: str, where: str) -> str:
        return translated.get(f"{where}.{field}") or str(item.get(field) or "")

    arguments = [scheduler_pb2.CommandArgument(name=str(a["name"]), description=text(a, "description", f"{path}.arguments[{i}]"),
                                               required=a.get("required") is True, variadic=a.get("variadic") is True,
                                               choices=[str(c) for c in a.get("choices") or []])
                 for i, a in enumerate(entry.get("arguments") or []) if isinstance(a, dict) and isinstance(a.get("name"), str)]
    return scheduler_pb2.Command(name=entry["name"].lstrip("/"), plugin_id=plugin_id, action=entry["action"],
                                 description=text(entry, "description", path), label=text(entry, "label", path), arguments=arguments,
                                 context=[public_enum(resources_pb2.CommandContext, c) for c in entry.get("context") or [] if c in COMMAND_CONTEXTS])


def parse_command(text: str, commands: list[scheduler_pb2.Command]) -> tuple[scheduler_pb2.Command, dict[str, Any]]:
    """The command a line names and its arguments by name; INVALID_ARGUMENT / NOT_FOUND naming `text`."""
    if not text.startswith("/"):
        raise invalid_argument("text", "a command starts with /, e.g. /roll 2d6 (ListCommands lists them)")
    try:
        words = shlex.split(text[1:])
    except ValueError as error:
        raise invalid_argument("text", f"cannot split it into words: {error}") from None
    name, rest = (words[0], words[1:]) if words else ("", [])
    found = [command for command in commands if command.name == name]
    if not found:
        raise not_found(f"text: no command /{name} in this session (its commands: {', '.join('/' + c.name for c in commands) or 'none'})",
                        "covel.scheduler.v1.Command", name, reason="COMMAND_NOT_FOUND")
    if len(found) > 1:
        raise invalid_argument("text", f"/{name} is a command of several plugins ({', '.join(c.plugin_id for c in found)}); "
                                       "call InvokeAction with the plugin you mean")
    command = found[0]
    return command, _arguments(command, rest)


def _arguments(command: scheduler_pb2.Command, words: list[str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for index, argument in enumerate(command.arguments):
        last = index == len(command.arguments) - 1
        if argument.variadic and last:
            value: Any = words[index:]
        else:
            value = words[index] if index < len(words) else None
        if argument.required and (value is None or value == []):
            raise invalid_argument("text", f"/{command.name} needs <{argument.name}>{': ' + argument.description if argument.description else ''}")
        if argument.choices and value is not None:
            for item in value if isinstance(value, list) else [value]:
                if item not in argument.choices:
                    raise invalid_argument("text", f"/{command.name} <{argument.name}> is one of {', '.join(argument.choices)}, not {item!r}")
        if value is not None and value != []:
            args[argument.name] = value
    expected = len(command.arguments)
    if len(words) > expected and not (command.arguments and command.arguments[-1].variadic):
        raise invalid_argument("text", f"/{command.name} takes {expected} argument{'s' if expected != 1 else ''}, not {len(words)}")
    return args


def command_context(wanted: list[str], session: store_pb2.Session, packages: list[Package]) -> dict[str, Any]:
    """What a command's `context` asks the host to hand its action."""
    context: dict[str, Any] = {}
    if "session" in wanted:
        context["session"] = {"id": session.id, "phase": session.phase, "locale": session.locale, "worldId": session.world_id,
                              "completedPlayerTurns": session.completed_player_turns}
    if "active-runtimes" in wanted:
        context["activeRuntimes"] = sorted(runtime.runtime_id for package in packages for runtime in package.runtimes)
    if "models" in wanted:
        context["models"] = sorted({override for override in session.runtime_model_overrides.values() if override})
    return context

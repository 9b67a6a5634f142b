"""Run plugin tools registered by entry modules (`covel.register_tool`), with the unified result.

Every call answers `{ok: true, data}` or `{ok: false, error: {code, message, hint?}}`:
arguments that do not fit the tool's JSON Schema, a tool that raises, returns something
that is not JSON, or passes its time limit, all become an error result for the model,
never a crash of the kernel. A plain `def` tool runs in a plugin thread under the same time
limit (shared/plugin_threads.py), so a slow one never blocks the hooks service.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from shared import json_schemas
from shared.plugin_sdk import ToolRegistration
from shared.plugin_sdk.registrar import RpcRegistration, ServiceRegistration
from shared.plugin_sdk.tools import ToolContext, ToolError, tool_error, tool_ok
from shared.plugin_threads import call_plugin_code

TOOL_TIMEOUT_S = 30.0


async def call_tool(tool: ToolRegistration, context: ToolContext, arguments: str, timeout_s: float = TOOL_TIMEOUT_S) -> dict[str, Any]:
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as error:
        return tool_error("invalid-input", f"arguments are not JSON: {error}", "send the arguments as one JSON object")
    problems = sorted(json_schemas.validator(tool.parameters, draft_from_schema=False).iter_errors(args), key=lambda e: list(e.absolute_path))
    if problems:
        listed = "; ".join(
            f"{'/'.join(str(p) for p in problem.absolute_path) or '(arguments)'}: {problem.message}" for problem in problems[:3]
        )
        return tool_error("invalid-input", listed, "call the tool again with arguments that fit its parameters")
    try:
        outcome = await asyncio.wait_for(call_plugin_code(tool.handler, context, args), timeout_s)
    except ToolError as error:
        return tool_error(error.code, error.message, error.hint)
    except TimeoutError:
        context.signal.abort("timeout")
        return tool_error("timeout", f"the tool {tool.name} did not answer within {timeout_s:.0f} s")
    except Exception as error:  # plugin code
        return tool_error("internal", f"the tool {tool.name} failed: {type(error).__name__}: {error}")
    try:
        json.dumps(outcome)
    except (TypeError, ValueError):
        return tool_error("internal", f"the tool {tool.name} returned a value that is not JSON ({type(outcome).__name__})")
    return tool_ok(outcome)


def service_tool(service: ServiceRegistration) -> ToolRegistration:
    """A registered service as a callable tool: `implementation(ctx, args)` (or its `.call`), with
    its `parameters` JSON Schema and `description` attributes when it has them."""
    implementation = service.implementation
    handler = implementation if callable(implementation) else getattr(implementation, "call", None)
    if handler is None:
        raise TypeError(f"the service {service.contract} of {service.plugin_id} is neither callable nor has a call method")
    return ToolRegistration(
        plugin_id=service.plugin_id, name=service.contract,
        description=str(getattr(implementation, "description", "") or f"The {service.contract} service of {service.plugin_id}."),
        parameters=dict(getattr(implementation, "parameters", None) or {"type": "object"}),
        handler=handler, read_only=service.access == "read",
    )


def action_tool(action: RpcRegistration) -> ToolRegistration:
    """A registered action (covel.register_rpc) as a callable tool: `handler(context, payload)`, any payload object."""
    return ToolRegistration(plugin_id=action.plugin_id, name=f"action {action.action}", description=action.description,
                            parameters={"type": "object"}, handler=action.handler, read_only=False)

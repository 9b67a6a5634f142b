"""ValidateForm: a plugin's form validator (covel.register_form_validator) on a player's answer.

A validator is `validator(ctx, values)` with a ToolContext (sandboxed like a tool). It accepts with None,
True or an empty dict; it refuses with {field: message} ("" for the answer as a whole), a list of
messages, or False. Raising or timing out refuses the answer with that reason: a validator that cannot
decide never lets an answer through.
"""

from __future__ import annotations

import json
from typing import Any

from covel.hooks.v1 import hooks_pb2
from services.hooks.tool_host import call_tool
from shared.plugin_sdk.registrar import FormValidatorRegistration, ToolRegistration
from shared.plugin_sdk.tools import ToolContext

VALIDATOR_TIMEOUT_S = 10.0
MESSAGE_MAX = 500


async def validate_form(form: FormValidatorRegistration, context: ToolContext, values: dict[str, Any]) -> hooks_pb2.ValidateFormResponse:
    validator = ToolRegistration(plugin_id=form.plugin_id, name=f"form {form.form_id}", description="", parameters={"type": "object"},
                                 handler=form.validator, read_only=True)
    result = await call_tool(validator, context, json.dumps(values), timeout_s=VALIDATOR_TIMEOUT_S)
    if not result.get("ok"):
        return hooks_pb2.ValidateFormResponse(found=True, error=str(result["error"].get("message") or "the validator failed"))
    return hooks_pb2.ValidateFormResponse(found=True, problems=problems_of(result.get("data")))


def problems_of(verdict: Any) -> list[hooks_pb2.FormProblem]:
    if verdict is None or verdict is True or verdict == {} or verdict == []:
        return []
    if verdict is False:
        return [hooks_pb2.FormProblem(field="", message="the form's validator refused the answer")]
    if isinstance(verdict, dict):
        return [hooks_pb2.FormProblem(field=str(field), message=str(message)[:MESSAGE_MAX]) for field, message in verdict.items()]
    if isinstance(verdict, list):
        return [hooks_pb2.FormProblem(field="", message=str(message)[:MESSAGE_MAX]) for message in verdict]
    return [hooks_pb2.FormProblem(field="", message=f"the form's validator answered {type(verdict).__name__}, not a verdict")]

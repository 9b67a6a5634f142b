"""An agent's final answer: its JSON, what is wrong with it (story shape, a system agent's schemas), and
the effect fields a model may write but only tools can produce (spec: Agent 的输出, 输出修复)."""

from __future__ import annotations

import json
import re
from typing import Any

from services.scheduler.execution.player_effects import SHOWN_CHANNELS, check_shown
from services.scheduler.execution.story_output import story_problems
from shared import json_schemas
from shared.logs import get_logger

# Fields a model may write in its final JSON that only tools can produce: stripped (spec: Agent 的输出).
EFFECT_FIELDS = ("statePatches", "pluginData", "notifications", "assetGenerations", "interactions", "ui")
log = get_logger(component="agent_runtime")


def split_effects(value: dict[str, Any], runtime_id: str) -> dict[str, Any]:
    """The business output of a model's final JSON: effect fields (and events with a topic) dropped, logged."""
    dropped = [name for name in EFFECT_FIELDS if name in value]
    kept = {key: item for key, item in value.items() if key not in EFFECT_FIELDS}
    events = kept.get("events")
    if isinstance(events, list) and any(isinstance(e, dict) and "topic" in e for e in events):
        kept["events"] = [e for e in events if not (isinstance(e, dict) and "topic" in e)]
        dropped.append("events[].topic")
    if dropped:
        log.warning("model-written effect fields ignored", runtime_id=runtime_id, fields=dropped)
    return kept


def completion_split(output: dict[str, Any], *, from_tool: bool) -> tuple[dict[str, Any], dict[str, list], str | None]:
    """The agent boundary (spec: Agent 的输出): `preGameDone: true` or `completion` in the final output becomes the
    completion signal, left out of the business output; a finishing tool's interactions, notifications and ui
    (it is on the agent's tool list) become its shown effects. ShownInvalid for a malformed one."""
    business = dict(output)
    completion = business.pop("completion", None)
    if business.pop("preGameDone", None) is True:
        completion = "done"
    if completion not in ("done", "pending"):
        completion = None
    shown: dict[str, list] = {}
    if from_tool:
        for name in SHOWN_CHANNELS:
            items = business.pop(name, None)
            if items is None:
                continue
            check_shown(name, items)
            shown[name] = items
    return business, shown, completion


def log_model_effects(content: str, runtime_id: str) -> None:
    """A final answer that is JSON: any effect field in it is dropped with the usual warning."""
    value, _ = parse_json_answer(content) if content.lstrip().startswith(("{", "`")) else (None, "")
    if value is not None:
        split_effects(value, runtime_id)


def parse_json_answer(content: str) -> tuple[dict[str, Any] | None, str]:
    """A system agent's final answer as a JSON object (a ```json fence is allowed); or the problem."""
    text = content.strip()
    fenced = re.match(r"^```(?:json)?\s*(.*?)\s*```$", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    if not text:
        return None, "the answer is empty"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return None, f"the answer is not JSON: {error.msg} at line {error.lineno} column {error.colno}"
    if not isinstance(value, dict):
        return None, "the answer must be one JSON object"
    return value, ""


def schema_problems(value: Any, schemas: list[tuple[str, dict[str, Any]]]) -> list[str]:
    problems: list[str] = []
    for label, schema in schemas:
        for error in sorted(json_schemas.validator(schema, draft_from_schema=False).iter_errors(value), key=lambda e: list(e.absolute_path)):
            where = "/" + "/".join(str(p) for p in error.absolute_path) if error.absolute_path else "(root)"
            problems.append(f"{where}: {error.message} ({label})")
    return problems


def answer_problems(content: str, *, story: bool, structured_story: bool, output_schemas: list[tuple[str, dict[str, Any]]],
                    finished_by_tool: bool, runtime_id: str) -> tuple[list[str], dict[str, Any] | None]:
    """What is wrong with a final answer (story shape, or a system agent's JSON against its schemas),
    and the system agent's business output when it parsed."""
    if story:
        if structured_story:
            return story_problems(content), None
        # A plain-text story is repaired only when it is empty (spec: 故事正文为空).
        return ([] if content.strip() else ["the story is empty"]), None
    if not output_schemas or finished_by_tool:
        return [], None
    value, problem = parse_json_answer(content)
    if value is None:
        return [problem], None
    value = split_effects(value, runtime_id)
    return schema_problems(value, output_schemas), value

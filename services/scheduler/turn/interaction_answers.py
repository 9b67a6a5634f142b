"""Answers to interactions: a player action carrying `interaction {id, values}` (SubmitInteraction builds one).

Before the turn runs (after its lease, which read the session's open interactions) each answer is checked:
the interaction is open (NOT_FOUND for an unknown one, FAILED_PRECONDITION for one answered already), the
action's kind is the interaction's (`actionKind`; by default `say` for a choice, `act` for a form or a confirmation), the values fit it (a form's schema, one of a
choice's options, a confirmation's yes or no) and the asking plugin's form validator accepts them; a refusal is
INVALID_ARGUMENT naming the field (`actions[i].interaction.values.<field>`). The turn's commit closes it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from covel.common.v1 import common_pb2
from covel.hooks.v1 import hooks_pb2
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2
from services.scheduler.execution.outcome import Resume
from shared import json_schemas
from shared.errors import FieldViolation, ServiceError, failed_precondition, invalid_argument, invalid_arguments, not_found
from shared.structs import from_struct

# The action kind an answer counts as when the interaction names none (spec: a choice's answer is `say`, a form's
# and a confirmation's `act`).
DEFAULT_KINDS = {"choice": "say", "form": "act", "confirm": "act"}
# Asks the hooks service for a plugin's form validator's verdict (HookBus.validate_form).
ValidateForm = Callable[[str, str, dict[str, Any]], Awaitable[hooks_pb2.ValidateFormResponse]]
# Reads the session's interactions, answered ones too (only to tell an answered one from an unknown one).
ListAll = Callable[[], Awaitable[list[store_pb2.InteractionRecord]]]


def answer_kind(interaction: store_pb2.Interaction) -> str:
    return interaction.action_kind or DEFAULT_KINDS.get(interaction.kind, "act")


def rendered_answer(interaction: store_pb2.Interaction, values: dict[str, Any]) -> str:
    """The answer as the player message shows it (history and prompts read this text)."""
    spec = from_struct(interaction.spec)
    if interaction.kind == "choice":
        return next((str(o.get("label")) for o in spec.get("options") or [] if o.get("id") == values.get("option")), str(values.get("option")))
    if interaction.kind == "confirm":
        return "Yes" if values.get("confirmed") is True else "No"
    order = [name for name in spec.get("fieldOrder") or [] if name in values] + sorted(set(values) - set(spec.get("fieldOrder") or []))
    shown = (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False) for value in (values[name] for name in order))
    return "; ".join(f"{name}: {value}" for name, value in zip(order, shown, strict=True))


def value_problems(interaction: store_pb2.Interaction, values: dict[str, Any], where: str) -> list[FieldViolation]:
    spec = from_struct(interaction.spec)
    if interaction.kind == "choice":
        options = [str(o.get("id")) for o in spec.get("options") or []]
        if values.get("option") not in options or set(values) != {"option"}:
            return [FieldViolation(f"{where}.option", f"must be one of {', '.join(options)} (and nothing else)")]
        return []
    if interaction.kind == "confirm":
        if not isinstance(values.get("confirmed"), bool) or set(values) != {"confirmed"}:
            return [FieldViolation(f"{where}.confirmed", "must be true or false (and nothing else)")]
        return []
    errors = sorted(json_schemas.validator(spec.get("schema") or {}).iter_errors(values), key=lambda e: list(e.absolute_path))
    return [FieldViolation(".".join([where, *(str(p) for p in error.absolute_path)]), error.message) for error in errors[:5]]


@dataclass
class ResumeCall:
    """SubmitInteraction's answer to a suspended agent's question: the interaction, and the run to resume."""

    record: store_pb2.InteractionRecord
    resume: Resume


async def check_answers(actions: list[common_pb2.PlayerAction], open_interactions: list[store_pb2.InteractionRecord],
                        validate_form: ValidateForm, list_all: ListAll, *, resuming: bool = False) -> None:
    """Raises NOT_FOUND, FAILED_PRECONDITION or INVALID_ARGUMENT for the first answer that does not hold. A suspended
    agent's question is answered only by SubmitInteraction (`resuming`): its answer resumes that agent."""
    by_id = {record.interaction.id: record.interaction for record in open_interactions}
    answered: set[str] = set()
    for index, action in enumerate(actions):
        if not action.HasField("interaction"):
            continue
        where = f"actions[{index}].interaction"
        interaction = by_id.get(action.interaction.id)
        if interaction is None or action.interaction.id in answered:
            await _not_open(action.interaction.id, f"{where}.id", list_all)
        assert interaction is not None
        answered.add(interaction.id)
        if interaction.resumes and not resuming:
            raise invalid_argument(f"{where}.id", f"{interaction.runtime_id} waits for this answer: send it with SubmitInteraction, "
                                                  "which resumes that runtime")
        if action.kind != answer_kind(interaction):
            raise invalid_argument(f"actions[{index}].kind", f"the interaction {interaction.id} is answered as {answer_kind(interaction)!r}")
        values = from_struct(action.interaction.values)
        problems = value_problems(interaction, values, f"{where}.values")
        if not problems and interaction.form_id:
            problems = _validator_problems(await validate_form(interaction.plugin_id, interaction.form_id, values), f"{where}.values")
        if problems:
            raise invalid_arguments(problems)


async def _not_open(interaction_id: str, where: str, list_all: ListAll) -> None:
    raise not_open(interaction_id, where, next((r for r in await list_all() if r.interaction.id == interaction_id), None))


def not_open(interaction_id: str, where: str, record: store_pb2.InteractionRecord | None) -> ServiceError:
    """NOT_FOUND for an interaction the session never asked, FAILED_PRECONDITION for one answered already."""
    if record is not None:
        return failed_precondition(f"{where}: the interaction {interaction_id} was answered already (turn {record.answered_turn_id})",
                                   reason="INTERACTION_ANSWERED", subject=f"interactions/{interaction_id}")
    return not_found(f"{where}: this session has no interaction {interaction_id!r} (ListInteractions lists the open ones)",
                     "covel.scheduler.v1.Interaction", interaction_id, reason="INTERACTION_NOT_FOUND")


def _validator_problems(verdict: hooks_pb2.ValidateFormResponse, where: str) -> list[FieldViolation]:
    if verdict.error:
        return [FieldViolation(where, f"the form's validator could not check the answer: {verdict.error}")]
    return [FieldViolation(f"{where}.{problem.field}" if problem.field else where, problem.message) for problem in verdict.problems]


def answer_action(request: scheduler_pb2.SubmitInteractionRequest, records: list[store_pb2.InteractionRecord]) -> tuple[store_pb2.InteractionRecord, common_pb2.PlayerAction]:
    """SubmitInteraction's interaction and player action: the interaction's kind, the rendered answer as its text, the
    answer attached. NOT_FOUND / FAILED_PRECONDITION here already for an unknown or answered interaction (the turn
    checks it again)."""
    record = next((r for r in records if r.interaction.id == request.interaction_id), None)
    if record is None or record.status != "open":
        raise not_open(request.interaction_id, "interaction_id", record)
    values = from_struct(request.values)
    problems = value_problems(record.interaction, values, "values")
    if problems:
        raise invalid_arguments(problems)
    text = rendered_answer(record.interaction, values) or f"({record.interaction.title or 'answered'})"
    return record, common_pb2.PlayerAction(seat_id=request.seat_id or "main", kind=answer_kind(record.interaction), text=text[:4000],
                                           interaction=common_pb2.InteractionAnswer(id=request.interaction_id, values=request.values))

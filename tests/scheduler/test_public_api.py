"""The public API package (covel.scheduler.v1): its own messages, its closed sets as enums, mapped from the
kernel's internal messages without losing a field or a value (services/scheduler/public_api.py)."""

from __future__ import annotations

import typing

import grpc
import pytest

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2
from covel.scheduler.internal.v1 import turn_events_pb2
from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from services.registry import session_resolution
from services.registry.manifest_models import ActionKindDecl
from services.scheduler.execution import player_effects, progress, story_output
from services.scheduler.public_api import convert, enum_number, enum_text, request_text, request_texts, respond
from services.scheduler.turn import plugin_actions, selection, settlements
from services.store import validation
from shared import seats
from shared.errors import ServiceError
from shared.hook_events import HANDLER_STATUSES
from shared.plugin_sdk.values import COMPLETIONS
from shared.structs import to_struct

# Each public message and the internal message the scheduler maps onto it.
COUNTERPARTS = {
    "Session": store_pb2.Session, "Seat": store_pb2.Seat, "PluginPause": store_pb2.PluginPause, "Turn": store_pb2.Turn,
    "RuntimeResult": store_pb2.RuntimeResult, "ProposalOutcome": store_pb2.ProposalOutcome, "DiscardedUnit": store_pb2.DiscardedUnit,
    "EmittedEvent": store_pb2.EmittedEvent, "Notification": store_pb2.Notification, "UiBlock": store_pb2.UiBlock,
    "Interaction": store_pb2.Interaction, "InteractionRecord": store_pb2.InteractionRecord,
    "DimensionSettlement": store_pb2.DimensionSettlement, "LorebookEntry": store_pb2.LorebookEntry, "DetachedJob": store_pb2.DetachedJob,
    "PausedPlugin": store_pb2.PluginPause,
    "PlayerAction": common_pb2.PlayerAction, "InteractionAnswer": common_pb2.InteractionAnswer, "Message": common_pb2.Message,
    "Segment": common_pb2.Segment, "HookTraceEntry": common_pb2.HookTraceEntry, "Diagnostic": common_pb2.Diagnostic,
    "RejectedPlugin": registry_pb2.RejectedPlugin, "UnmetRequirement": registry_pb2.UnmetRequirement, "Pack": registry_pb2.Pack,
    "MissingPlugin": registry_pb2.MissingPlugin, "PluginPlan": registry_pb2.PluginPlan,
    "PluginResolution": registry_pb2.ResolveSessionPluginsResponse, "World": registry_pb2.World,
    "WorldDimension": registry_pb2.WorldDimension, "WorldPluginPolicy": registry_pb2.WorldPluginPolicy,
    "WorldDataSource": registry_pb2.WorldDataSource, "WorldLorebookEntry": registry_pb2.WorldLorebookEntry,
    "WorldOpening": registry_pb2.WorldOpening, "LorebookActivation": common_pb2.LorebookActivation,
    "LorebookSettings": common_pb2.LorebookSettings, "TokenUsage": store_pb2.TokenUsage, "PluginCard": registry_pb2.PluginCard,
}
# The turn stream: scheduler.v1's events from the scheduler's internal ones.
EVENT_COUNTERPARTS = {name: getattr(turn_events_pb2, name)
                      for name in ("TurnEvent", "TurnEventBatch", "TurnStarted", "RuntimeStarted", "RuntimeFinished", "NarrativeDelta",
                                   "RuntimeProgress")}
# Internal fields clients never get (reserved in the public message).
INTERNAL_ONLY = {("DetachedJob", "lease_id"), ("RuntimeResult", "suspension"), ("DimensionSettlement", "input"),
                 ("PausedPlugin", "turn_id")}

# Each closed set and the values the kernel gives it (its constant where the kernel has one).
CLOSED_SETS = {
    resources_pb2.TurnOrigin: validation.ORIGINS,
    resources_pb2.SessionPhase: validation.PHASES,
    resources_pb2.SeatRole: seats.ROLES,
    resources_pb2.RuntimeStage: selection.STAGES,
    resources_pb2.ProgressStatus: progress.STATUSES,
    resources_pb2.CommandContext: plugin_actions.COMMAND_CONTEXTS,
    resources_pb2.NotificationLevel: player_effects.LEVELS,
    resources_pb2.UiSlot: player_effects.SLOTS,
    resources_pb2.InteractionKind: player_effects.INTERACTION_KINDS,
    resources_pb2.SegmentKind: story_output.KINDS,
    resources_pb2.SettlementResolution: settlements.RESOLUTIONS,
    resources_pb2.DetachedJobStatus: validation.JOB_STATES,
    resources_pb2.HookStatus: HANDLER_STATUSES,
    resources_pb2.SetupCompletion: COMPLETIONS,
    resources_pb2.TextRule: typing.get_args(typing.get_args(ActionKindDecl.model_fields["text"].annotation)[0]),
    resources_pb2.PluginRejection: (session_resolution.NOT_FOUND, session_resolution.FAILED_TO_LOAD, session_resolution.MISSING_PROVIDER,
                                    session_resolution.AMBIGUOUS_PROVIDER, session_resolution.CONFLICT, session_resolution.SUPERSEDED,
                                    session_resolution.EVENT_TOPIC_CONFLICT, session_resolution.APPROVAL_REQUIRED, "not-installed"),
    resources_pb2.RequirementGap: (session_resolution.MISSING_PROVIDER, session_resolution.AMBIGUOUS_PROVIDER,
                                   session_resolution.APPROVAL_REQUIRED, session_resolution.EXCLUDED),
    # The store's and the registry's documented values (store.proto, registry.proto, common.proto).
    resources_pb2.RuntimeStatus: ("success", "failed", "skipped", "suspended"),
    resources_pb2.MessageRole: ("player", "story", "system", "summary"),
    resources_pb2.SettlementStatus: ("pending", "settled", "handled", "skipped"),
    resources_pb2.InteractionStatus: ("open", "answered"),
    resources_pb2.DataVisibility: ("public", "hidden"),
    resources_pb2.DataKind: ("list", "map", "document"),
    resources_pb2.ActionSource: ("player", "system"),
    resources_pb2.SessionEnding: ("ended", "deleted"),
}
# Closed sets the internal messages already hold as enums: the same values by name.
SAME_ENUMS = {resources_pb2.TurnStatus: store_pb2.TurnStatus, resources_pb2.SessionStatus: store_pb2.SessionStatus,
              resources_pb2.ProposalStatus: store_pb2.ProposalStatus, resources_pb2.WorldState: registry_pb2.WorldState,
              resources_pb2.Severity: common_pb2.Severity}


def _kernel_imports(file_descriptor) -> list[str]:
    return [dep.name for dep in file_descriptor.dependencies if dep.name.startswith("covel/") and dep.package != "covel.scheduler.v1"]


def test_the_public_package_imports_nothing_of_the_kernel():
    assert _kernel_imports(scheduler_pb2.DESCRIPTOR) == []
    assert _kernel_imports(resources_pb2.DESCRIPTOR) == []


def test_every_public_record_has_its_counterpart():
    assert set(resources_pb2.DESCRIPTOR.message_types_by_name) == set(COUNTERPARTS)


def _same_kind(public, source) -> bool:
    """A public field can be filled from the internal one: the counterpart message, the same well-known type,
    an enum from a text or an enum, or the same scalar."""
    if source.is_repeated != public.is_repeated:
        return False
    if public.message_type is not None and public.message_type.GetOptions().map_entry:
        return source.message_type is not None and _same_kind(public.message_type.fields_by_name["value"],
                                                              source.message_type.fields_by_name["value"])
    if public.message_type is not None:
        counterpart = COUNTERPARTS.get(public.message_type.name) or EVENT_COUNTERPARTS.get(public.message_type.name)
        expected = counterpart.DESCRIPTOR.full_name if counterpart is not None else public.message_type.full_name
        return source.message_type is not None and source.message_type.full_name == expected
    if public.enum_type is not None:
        return source.type in (source.TYPE_STRING, source.TYPE_ENUM)
    return source.type == public.type


@pytest.mark.parametrize("name", [*COUNTERPARTS, *EVENT_COUNTERPARTS])
def test_each_public_field_is_filled_from_the_internal_message(name):
    public = (resources_pb2.DESCRIPTOR.message_types_by_name.get(name) or scheduler_pb2.DESCRIPTOR.message_types_by_name[name])
    internal = (COUNTERPARTS.get(name) or EVENT_COUNTERPARTS[name]).DESCRIPTOR
    for field in public.fields:
        source = internal.fields_by_name.get(field.name)
        assert source is not None, f"{name}.{field.name} has no internal field to come from"
        assert source.number == field.number, f"{name}.{field.name}: numbered as the internal field (the wire form carries it)"
        assert _same_kind(field, source), f"{name}.{field.name} cannot be filled from {internal.full_name}.{field.name}"
    left_behind = {(name, f.name) for f in internal.fields} - {(name, f.name) for f in public.fields}
    assert left_behind <= INTERNAL_ONLY, f"internal fields without a public place: {left_behind}"


@pytest.mark.parametrize("enum", list(CLOSED_SETS), ids=lambda e: e.DESCRIPTOR.name)
def test_each_closed_set_has_exactly_the_kernels_values(enum):
    descriptor = enum.DESCRIPTOR
    values = tuple(CLOSED_SETS[enum])
    assert sorted(enum_text(descriptor, value.number) for value in descriptor.values if value.number) == sorted(values)
    for text in values:
        assert enum_text(descriptor, enum_number(descriptor, text)) == text


@pytest.mark.parametrize("public", list(SAME_ENUMS), ids=lambda e: e.DESCRIPTOR.name)
def test_enums_the_kernel_already_has_keep_their_values(public):
    assert dict(public.items()) == dict(SAME_ENUMS[public].items())


def test_a_turn_maps_whole_with_its_texts_as_enums():
    turn = store_pb2.Turn(
        id="t1", status=store_pb2.TURN_STATUS_COMMITTED, origin="continuation",
        actions=[common_pb2.PlayerAction(kind="advance", source="system")],
        runtime_results=[store_pb2.RuntimeResult(runtime_id="p/r", status="suspended", completion="pending", output=to_struct({"a": 1}),
                                                 suspension=to_struct({"kept": True}),
                                                 notifications=[store_pb2.Notification(level="warning", text="low")],
                                                 ui=[store_pb2.UiBlock(slot="right")], interactions=[store_pb2.Interaction(kind="confirm")])],
        hook_trace=[common_pb2.HookTraceEntry(status="invalid-result")],
        messages=[common_pb2.Message(role="summary", metadata=to_struct({"throughSeq": 3}))],
    )
    shown = convert(turn, resources_pb2.Turn)
    result = shown.runtime_results[0]
    assert (shown.status, shown.origin, shown.actions[0].source) == (
        resources_pb2.TURN_STATUS_COMMITTED, resources_pb2.TURN_ORIGIN_CONTINUATION, resources_pb2.ACTION_SOURCE_SYSTEM)
    assert (result.status, result.completion, result.notifications[0].level, result.ui[0].slot, result.interactions[0].kind) == (
        resources_pb2.RUNTIME_STATUS_SUSPENDED, resources_pb2.SETUP_COMPLETION_PENDING, resources_pb2.NOTIFICATION_LEVEL_WARNING,
        resources_pb2.UI_SLOT_RIGHT, resources_pb2.INTERACTION_KIND_CONFIRM)
    assert shown.hook_trace[0].status == resources_pb2.HOOK_STATUS_INVALID_RESULT
    assert shown.messages[0].role == resources_pb2.MESSAGE_ROLE_SUMMARY and shown.messages[0].metadata["throughSeq"] == 3
    assert result.output["a"] == 1 and "suspension" not in str(result)


def test_a_batch_of_events_converts_each_event_with_its_texts_as_enums():
    internal = turn_events_pb2
    batch = internal.TurnEvent(batch=internal.TurnEventBatch(events=[
        internal.TurnEvent(runtime_started=internal.RuntimeStarted(runtime_id="p/r", stage="narrative")),
        internal.TurnEvent(turn_completed=store_pb2.Turn(id="t1", status=store_pb2.TURN_STATUS_COMMITTED, origin="continuation")),
    ]))
    started, completed = convert(batch, scheduler_pb2.TurnEvent).batch.events
    assert started.runtime_started.stage == resources_pb2.RUNTIME_STAGE_NARRATIVE
    assert completed.turn_completed.origin == resources_pb2.TURN_ORIGIN_CONTINUATION


def test_maps_and_renamed_records_convert():
    session = store_pb2.Session(id="s", phase="setup", runtime_model_overrides={"p/r": "fast"},
                                setup_runtimes={"p/r": to_struct({"state": "pending"})}, seats=[store_pb2.Seat(id="main", role="director")])
    plan = registry_pb2.PluginPlan(resolution=registry_pb2.ResolveSessionPluginsResponse(
        active=["a"], unmet=[registry_pb2.UnmetRequirement(contract="c@1", code="excluded")]))
    reply = respond(scheduler_pb2.GetSessionResponse, session=session)
    assert reply.session.phase == resources_pb2.SESSION_PHASE_SETUP and reply.session.seats[0].role == resources_pb2.SEAT_ROLE_DIRECTOR
    assert dict(reply.session.runtime_model_overrides) == {"p/r": "fast"} and reply.session.setup_runtimes["p/r"]["state"] == "pending"
    shown = respond(scheduler_pb2.GetPluginPlanResponse, plan=plan).plan
    assert list(shown.resolution.active) == ["a"] and shown.resolution.unmet[0].code == resources_pb2.REQUIREMENT_GAP_EXCLUDED


def test_a_text_the_enum_lacks_is_unspecified_not_an_error():
    assert enum_number(resources_pb2.TurnOrigin.DESCRIPTOR, "from-the-future") == resources_pb2.TURN_ORIGIN_UNSPECIFIED


def test_requests_enums_become_the_kernels_texts_and_unknown_numbers_are_refused():
    assert request_text(scheduler_pb2.EndSessionRequest(reason=resources_pb2.SESSION_ENDING_DELETED), "reason") == "deleted"
    assert request_text(scheduler_pb2.EndSessionRequest(), "reason") == ""
    assert request_texts(scheduler_pb2.ListDetachedJobsRequest(statuses=[resources_pb2.DETACHED_JOB_STATUS_TIMED_OUT]), "statuses") == ["timed-out"]
    with pytest.raises(ServiceError) as refused:
        request_text(scheduler_pb2.EndSessionRequest(reason=typing.cast(typing.Any, 42)), "reason")
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT and "reason" in refused.value.message
    assert "SESSION_ENDING_DELETED" in refused.value.message
    with pytest.raises(ServiceError) as unnamed:
        request_texts(scheduler_pb2.ListDetachedJobsRequest(statuses=[resources_pb2.DETACHED_JOB_STATUS_UNSPECIFIED]), "statuses")
    assert "statuses[0]" in unnamed.value.message

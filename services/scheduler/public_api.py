"""The public API's messages (covel.scheduler.v1) from the kernel's internal ones, and back for requests.

The Scheduler API has records of its own (protos/covel/scheduler/v1/resources.proto) so clients never
depend on the store's, the registry's or the hooks service's messages. Fields are matched by name; a closed
set the kernel keeps as text becomes the public enum's value named <ENUM>_<TEXT> ("timed-out" in a
DetachedJobStatus is DETACHED_JOB_STATUS_TIMED_OUT), and an enum of the same values keeps its meaning.
Internal fields the public message has no place for (a job's lease id, a suspended agent's conversation)
are left behind.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, NamedTuple, TypeVar

from google.protobuf import message_factory
from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.message import Message

from shared.errors import invalid_argument
from shared.logs import get_logger

log = get_logger(component="scheduler")
M = TypeVar("M", bound=Message)


@cache
def enum_prefix(enum: EnumDescriptor) -> str:
    """TurnOrigin -> "TURN_ORIGIN_" (buf's ENUM_VALUE_PREFIX rule)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


def enum_number(enum: EnumDescriptor, text: str) -> int:
    """The public value of the kernel's text ("" and an unknown text: UNSPECIFIED, the latter logged)."""
    if not text:
        return 0
    value = enum.values_by_name.get(enum_prefix(enum) + text.upper().replace("-", "_"))
    if value is None:
        log.warning("public_api.unknown_value", enum=enum.full_name, value=text)
        return 0
    return value.number


def public_enum(enum: Any, text: str) -> Any:
    """The value of a generated enum (resources_pb2.SeatRole) the kernel's text names."""
    return enum_number(enum.DESCRIPTOR, text)


def enum_text(enum: EnumDescriptor, number: int) -> str:
    """The kernel's text of a value ("" for UNSPECIFIED and numbers the enum does not have)."""
    value = enum.values_by_number.get(number)
    if value is None or number == 0:
        return ""
    return value.name.removeprefix(enum_prefix(enum)).lower().replace("_", "-")


def request_text(request: Message, field: str) -> str:
    """A request's enum field as the kernel's text ("" for UNSPECIFIED); INVALID_ARGUMENT for a number the
    enum does not have (a client built from a newer proto, or a mistake)."""
    enum = request.DESCRIPTOR.fields_by_name[field].enum_type
    return _known_text(enum, getattr(request, field), field)


def request_texts(request: Message, field: str) -> list[str]:
    """A repeated enum field's texts; UNSPECIFIED is refused too (it names nothing)."""
    enum = request.DESCRIPTOR.fields_by_name[field].enum_type
    return [_known_text(enum, number, f"{field}[{index}]", allow_unspecified=False) for index, number in enumerate(getattr(request, field))]


def _known_text(enum: Any, number: int, field: str, *, allow_unspecified: bool = True) -> str:
    if number not in enum.values_by_number or (number == 0 and not allow_unspecified):
        names = ", ".join(value.name for value in enum.values if value.number)
        raise invalid_argument(field, f"is {number}, not a value of {enum.name}; use one of {names}")
    return enum_text(enum, number)


def from_request(message: Message, internal_type: type[M], field: str) -> M:
    """A record a client sent (a seat, a player action) as the kernel's message; INVALID_ARGUMENT naming
    `<field>.<enum field>` for a number its enum does not have."""
    _check_enums(message, field)
    return convert(message, internal_type)


def _check_enums(message: Message, path: str) -> None:
    for field, value in message.ListFields():
        where = f"{path}.{field.name}"
        if field.enum_type is not None:
            for index, number in enumerate(value if field.is_repeated else [value]):
                _known_text(field.enum_type, number, f"{where}[{index}]" if field.is_repeated else where)
        elif field.message_type is not None and not field.message_type.full_name.startswith("google.protobuf.") \
                and not field.message_type.GetOptions().map_entry:
            for index, item in enumerate(value if field.is_repeated else [value]):
                _check_enums(item, f"{where}[{index}]" if field.is_repeated else where)


def convert(source: Message, target_type: type[M]) -> M:
    """`source` as a `target_type` message. Both number their fields alike (tests/scheduler/test_public_api.py
    holds them to it), so the wire form carries every field whose encoding agrees; then the fields whose
    encoding differs (text against enum) are set from the source, and what the target has no place for
    (unknown to it: internal fields, texts parsed where an enum was expected) is dropped."""
    target = target_type()
    target.ParseFromString(source.SerializeToString())
    _fix(source, target, _plan(source.DESCRIPTOR, target.DESCRIPTOR))
    target.DiscardUnknownFields()
    return target


def respond(response_type: type[M], **fields: Any) -> M:
    """A public response from internal messages (or lists of them): each converted to its field's type.
    Scalars and enums are taken as they are."""
    response = response_type()
    descriptors: Any = response.DESCRIPTOR.fields_by_name
    for name, value in fields.items():
        field = descriptors[name]
        if value is None:
            continue
        if field.message_type is not None and field.is_repeated:
            getattr(response, name).extend(_as(item, field.message_type) for item in value)
        elif field.message_type is not None:
            getattr(response, name).CopyFrom(_as(value, field.message_type))
        elif field.is_repeated:
            getattr(response, name).extend(value)
        else:
            setattr(response, name, value)
    return response


def _as(message: Message, descriptor: Any) -> Message:
    if message.DESCRIPTOR.full_name == descriptor.full_name:
        return message
    return convert(message, message_factory.GetMessageClass(descriptor))


class Step(NamedTuple):
    """A target field the wire form does not carry right: `nested` (the source and target descriptors of a message
    field whose own fields need it: _plan of them) or `pair` (a text and an enum: the source and target fields, set
    through _scalar)."""

    name: str
    repeated: bool
    nested: tuple[Any, Any] | None = None
    pair: tuple[Any, Any] | None = None


@cache
def _plan(source: Any, target: Any) -> tuple[Step, ...]:
    """The fields of `target` the wire form does not carry right from `source`, down to the leaves."""
    return _steps(source, target, frozenset())


def _steps(source: Any, target: Any, outer: frozenset[tuple[Any, Any]]) -> tuple[Step, ...]:
    """_plan's steps; `outer`: the messages this one sits in, so a message that holds its own kind (a batch of turn
    events) is planned once."""
    steps: list[Step] = []
    for to in target.fields:
        field = source.fields_by_name.get(to.name)
        if field is None:
            continue
        if to.message_type is not None and field.message_type is not None:
            pair = (field.message_type, to.message_type)
            if to.message_type.full_name == field.message_type.full_name:
                continue
            if pair in outer or pair == (source, target) or _steps(*pair, outer | {(source, target)}):
                if to.message_type.GetOptions().map_entry:
                    raise TypeError(f"{target.full_name}.{to.name}: a map whose values need converting is not supported")
                steps.append(Step(to.name, to.is_repeated, nested=pair))
        elif (to.enum_type is None) != (field.enum_type is None):
            # Two enums of the same values (tests/scheduler/test_public_api.py) travel as their numbers.
            steps.append(Step(to.name, to.is_repeated, pair=(field, to)))
    return tuple(steps)


def _fix(source: Message, target: Message, plan: tuple[Step, ...]) -> None:
    for step in plan:
        name = step.name
        if step.pair is not None:
            field, to = step.pair
            if step.repeated:
                target.ClearField(name)
                getattr(target, name).extend(_scalar(field, to, value) for value in getattr(source, name))
            else:
                setattr(target, name, _scalar(field, to, getattr(source, name)))
        elif step.nested is None:
            continue
        elif step.repeated:
            nested = _plan(*step.nested)
            for inner_source, inner_target in zip(getattr(source, name), getattr(target, name), strict=True):
                _fix(inner_source, inner_target, nested)
        elif source.HasField(name):
            _fix(getattr(source, name), getattr(target, name), _plan(*step.nested))


def _scalar(field: Any, to: Any, value: Any) -> Any:
    """A text as the target's enum value, or an enum value as the target's text."""
    return enum_number(to.enum_type, value) if to.enum_type is not None else enum_text(field.enum_type, value)




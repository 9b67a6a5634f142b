"""The wire keeps its word: a client built from the released descriptor (protos/releases/scheduler-v1.binpb, what
`buf breaking` guards) plays a scripted session against today's scheduler, and every field it knows decodes as
it knows it. A field renumbered or retyped under the same number (the break of a string turned enum) arrives as an
unknown field of the released message and fails here, in `make test`, not only in `buf breaking`."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, unknown_fields
from google.protobuf.message import Message

from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT

# Its own sessions only: the session's shared group (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")

RELEASE = REPO_ROOT / "protos" / "releases" / "scheduler-v1.binpb"
SERVICE = "covel.scheduler.v1.Scheduler"


def released(files: descriptor_pb2.FileDescriptorSet | None = None) -> tuple[dict[str, type[Message]], descriptor_pool.DescriptorPool]:
    """The released messages, by full name, from a pool of their own (not the generated stubs of today)."""
    files = files or descriptor_pb2.FileDescriptorSet.FromString(RELEASE.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    names = [file.name for file in files.file if file.name.startswith("covel/")]
    return message_factory.GetMessageClassesForFiles(names, pool), pool


def misread_fields(message: Message, path: str = "") -> list[str]:
    """Fields the released message defines that came back as unknown (another wire type under their number), here
    or in any message inside it."""
    known = {field.number for field in message.DESCRIPTOR.fields}
    problems = [f"{path or message.DESCRIPTOR.name}: field {field.field_number} (wire type {field.wire_type})"
                for field in unknown_fields.UnknownFieldSet(message) if field.field_number in known]
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        items = value.values() if field.message_type.GetOptions().map_entry else (value if field.is_repeated else [value])
        for index, item in enumerate(items):
            if isinstance(item, Message):
                problems.extend(misread_fields(item, f"{path}.{field.name}[{index}]" if path else f"{field.name}[{index}]"))
    return problems


async def test_a_client_of_the_released_api_plays_todays_scheduler(services) -> None:
    classes, pool = released()
    service = pool.FindServiceByName(SERVICE)

    def method(name: str, channel, streamed: bool = False):
        descriptor = service.methods_by_name[name]
        request, response = classes[descriptor.input_type.full_name], classes[descriptor.output_type.full_name]
        call = channel.unary_stream if streamed else channel.unary_unary
        return request, call(f"/{SERVICE}/{name}", request_serializer=request.SerializeToString, response_deserializer=response.FromString)

    answers: list[Message] = []
    async with open_channel(services.addrs["scheduler"]) as channel:
        request, create = method("CreateSession", channel)
        created = await create(request(), timeout=30)
        answers.append(created)
        session_id = created.session.id
        request, submit = method("SubmitActions", channel, streamed=True)
        action_type = classes["covel.scheduler.v1.PlayerAction"]
        events = [event async for event in submit(request(session_id=session_id, actions=[action_type(kind="act", text="I open the door.")]),
                                                  timeout=60)]
        answers.extend(events)
        assert events and events[-1].WhichOneof("event") == "turn_completed", events[-1:]
        for name in ("GetSession", "ListTurns", "ListMessages"):
            request, call = method(name, channel)
            answers.append(await call(request(session_id=session_id), timeout=30))
    problems = [problem for answer in answers for problem in misread_fields(answer)]
    assert not problems, f"today's scheduler answers fields the released API reads otherwise: {problems}"
    story = [event.narrative_delta.text for event in events if event.WhichOneof("event") == "narrative_delta"]
    assert "".join(story).strip(), "the released client reads the streamed story"


async def test_a_field_retyped_under_its_number_is_caught() -> None:
    """The check can fail: a release whose Session.title were a number reads today's title as an unknown field."""
    from covel.scheduler.v1 import resources_pb2

    files = descriptor_pb2.FileDescriptorSet.FromString(RELEASE.read_bytes())
    [resources] = [file for file in files.file if file.name == "covel/scheduler/v1/resources.proto"]
    [session] = [message for message in resources.message_type if message.name == "Session"]
    [title] = [field for field in session.field if field.name == "title"]
    title.type = descriptor_pb2.FieldDescriptorProto.TYPE_INT64
    classes, _ = released(files)
    today = resources_pb2.Session(id="s1", title="The lighthouse").SerializeToString()
    read = classes["covel.scheduler.v1.Session"].FromString(today)
    assert misread_fields(read) == [f"Session: field {title.number} (wire type 2)"]

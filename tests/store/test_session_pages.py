"""ListSessions: one owner's sessions, most recently active first, a page at a time, on both backends."""

from __future__ import annotations

import uuid

import grpc

from covel.store.v1 import store_pb2
from tests.store.helpers import expect_error, new_session, play_turn, violated_fields


async def test_an_owners_sessions_come_newest_activity_first_in_pages(stub):
    owner, other = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    made = [await new_session(stub, owner=owner, title=f"story {n}") for n in range(5)]
    await new_session(stub, owner=other)
    await play_turn(stub, made[0].id, "The oldest session plays again.")
    seen, token, pages = [], "", 0
    while True:
        page = await stub.ListSessions(store_pb2.ListSessionsRequest(owner=owner, page_size=2, page_token=token))
        seen.extend(session.id for session in page.sessions)
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert pages == 3 and seen[0] == made[0].id, "the session that played last comes first"
    assert sorted(seen) == sorted(session.id for session in made), "every one of the owner's, none twice, no other owner's"

    await stub.EndSession(store_pb2.EndSessionRequest(session_id=made[1].id))
    active = await stub.ListSessions(store_pb2.ListSessionsRequest(owner=owner))
    assert made[1].id not in [s.id for s in active.sessions] and len(active.sessions) == 4 and not active.next_page_token
    every = await stub.ListSessions(store_pb2.ListSessionsRequest(owner=owner, include_ended=True))
    assert made[1].id in [s.id for s in every.sessions]


async def test_bad_page_sizes_and_tokens_name_their_field(stub):
    for request, field in ((store_pb2.ListSessionsRequest(owner="x", page_size=500), "page_size"),
                           (store_pb2.ListSessionsRequest(owner="x", page_size=-1), "page_size"),
                           (store_pb2.ListSessionsRequest(owner="x", page_token="not a token"), "page_token"),
                           (store_pb2.ListSessionsRequest(owner="x", page_token="e30"), "page_token")):
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.ListSessions(request))
        assert violated_fields(error) == [field]

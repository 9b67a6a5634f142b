"""Whole lists the turn runner reads from the store's paged List RPCs (a page at a time, all of them)."""

from __future__ import annotations

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc


async def all_turns(store: store_pb2_grpc.TransactionalStoreStub, session_id: str) -> list[store_pb2.Turn]:
    turns: list[store_pb2.Turn] = []
    token = ""
    while True:
        page = await store.ListTurns(store_pb2.ListTurnsRequest(session_id=session_id, page_size=500, page_token=token))
        turns.extend(page.turns)
        if not (token := page.next_page_token):
            return turns


async def all_messages(store: store_pb2_grpc.TransactionalStoreStub, session_id: str) -> list[common_pb2.Message]:
    messages: list[common_pb2.Message] = []
    token = ""
    while True:
        page = await store.ListMessages(store_pb2.ListMessagesRequest(session_id=session_id, page_token=token))
        messages.extend(page.messages)
        if not (token := page.next_page_token):
            return messages

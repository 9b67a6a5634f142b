"""memory-search by keywords and by meaning: a real gateway (scripted embedder, or no embedding slot) and a real store's
vector index; the first search embeds what the index lacks, the next ones only the query; BM25 alone when there is no slot."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from covel.store.v1 import store_pb2
from services.scheduler.agent.indexed_vectors import IndexedVectors
from services.scheduler.agent.memory_search import (
    BM25,
    HYBRID,
    MemoryRecord,
    character_records,
    lorebook_records,
    plugin_data_record,
    search_memory,
)
from tests.conftest import free_addr
from tests.gateway.conftest import running_gateway
from tests.store.conftest import StoreUnderTest, settings_for
from tests.support.identities import bare_channel_as

MEMORIES = {"lamp": "Old Tobin tends the lighthouse lamp every night.", "cannery": "The cannery burned down last spring.",
            "bread": "The baker sells rye bread at dawn.", "oath": "Captain Hale swore an oath never to return."}


def records() -> list[MemoryRecord]:
    lore = [store_pb2.LorebookEntry(owner="world", id="reef", title="The North Reef", content="Sharp rocks at high water.")]
    return ([plugin_data_record("memory", "memories", key, text) for key, text in MEMORIES.items()] + lorebook_records(lore)
            + character_records([{"id": "tobin", "name": "Old Tobin", "aliases": ["the keeper"], "description": "Gruff.", "age": 70}]))


@pytest.fixture
async def store(tmp_path):
    settings, _ = settings_for("sqlite", tmp_path)
    under_test = StoreUnderTest(settings)
    await under_test.start()
    yield under_test
    await under_test.stop()


def peers(gateway, store: StoreUnderTest):
    return SimpleNamespace(gateway=gateway, store=store.stub)


async def test_hybrid_finds_a_paraphrase_bm25_misses_and_indexes_once(store) -> None:
    session = (await store.stub.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session()))).session
    items = records()
    assert items[-1].text == "Old Tobin. also called the keeper. Gruff."
    async with running_gateway() as gateway:
        vectors = IndexedVectors(peers(gateway, store), session.id)  # type: ignore[arg-type]
        assert (await search_memory(items, "canneries burning", 3))["results"] == []
        found = await search_memory(items, "canneries burning", 3, vectors)
        assert found["method"] == HYBRID and vectors.last_method in ("python", "sqlite-vec")
        best = found["results"][0]
        assert (best["source"], best["key"], best["match"], best["coverage"]) == ("archival:plugin_data", "cannery", "meaning", 0.0)
        assert best["similarity"] > 0.2
        # The first search put every record's vector: the index now lacks none.
        model = (await gateway.Embed(gateway_pb2.EmbedRequest(inputs=["x"]))).model
        indexed = await store.stub.SearchMemoryVectors(store_pb2.SearchMemoryVectorsRequest(
            session_id=session.id, model=model, query=[1.0] * 384, candidates=[r.vector_key() for r in items], limit=10))
        assert not indexed.missing and len(indexed.hits) == len(items)
        # A keyword hit is found by both and says so; characters and the lorebook are searched too.
        both = (await search_memory(items, "lighthouse keeper", 5, vectors))["results"]
        assert {(hit["source"], hit.get("key") or hit.get("id")) for hit in both[:2]} == {("archival:plugin_data", "lamp"), ("character", "tobin")}
        assert both[0]["match"] == "both"
        # A changed record is embedded again (its hash changed); the unchanged ones are not.
        changed = [*items[:-1], MemoryRecord("character", "tobin", "Old Tobin, who sells fish.")]
        await search_memory(changed, "fish", 3, vectors)
        again = await store.stub.SearchMemoryVectors(store_pb2.SearchMemoryVectorsRequest(
            session_id=session.id, model=model, query=[1.0] * 384, candidates=[r.vector_key() for r in changed], limit=10))
        assert not again.missing


async def test_bm25_alone_without_an_embedding_slot_or_a_gateway(store) -> None:
    session = (await store.stub.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session()))).session
    items = records()
    # A real provider for chat and no embedding model: the gateway refuses to embed with a chat model.
    async with running_gateway(gateway_openai_base_url="http://127.0.0.1:9/v1", gateway_openai_model="gpt-test") as gateway:
        found = await search_memory(items, "lighthouse", 3, IndexedVectors(peers(gateway, store), session.id))  # type: ignore[arg-type]
    assert found["method"] == BM25 and found["results"][0]["key"] == "lamp" and "match" not in found["results"][0]
    async with bare_channel_as(free_addr(), "scheduler") as channel:  # nobody listens
        unreachable = gateway_pb2_grpc.LlmGatewayStub(channel)
        vectors = IndexedVectors(SimpleNamespace(gateway=_Quick(unreachable), store=store.stub), session.id)  # type: ignore[arg-type]
        assert (await search_memory(items, "lighthouse", 3, vectors))["method"] == BM25


class _Quick:
    """The gateway stub with a short deadline and no waiting for a connection (nobody listens)."""

    def __init__(self, stub) -> None:
        self._stub = stub

    async def Embed(self, request, timeout=None, wait_for_ready=None):
        return await self._stub.Embed(request, timeout=0.5)


async def test_many_and_long_records_are_embedded_in_batches_by_their_beginning(store) -> None:
    session = (await store.stub.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session()))).session
    items = [plugin_data_record("memory", "memories", f"m{i}", f"memory number {i} of the harbour") for i in range(70)]
    items += [plugin_data_record("memory", "memories", "long", "lighthouse " * 5000), MemoryRecord("lorebook:world", "blank", " ")]
    async with running_gateway() as gateway:
        vectors = IndexedVectors(peers(gateway, store), session.id)  # type: ignore[arg-type]
        found = await search_memory(items, "lighthouses", 3, vectors)
        model = (await gateway.Embed(gateway_pb2.EmbedRequest(inputs=["x"]))).model
    assert found["method"] == HYBRID and found["results"][0]["key"] == "long"
    indexed = await store.stub.SearchMemoryVectors(store_pb2.SearchMemoryVectorsRequest(
        session_id=session.id, model=model, query=[1.0] * 384, candidates=[r.vector_key() for r in items[:-1]], limit=100))
    assert not indexed.missing and len(indexed.hits) == 71, "every record but the blank one, in two Embed calls (64 + 7)"

"""memory-search's ranking by meaning: the query embedded by the gateway, ranked by the store's vector index.

Records new or changed since the last search (the store lists them as `missing`) are embedded here,
put in the index for the next search, and scored against the query at once. Any failure leaves the
search to BM25 (services/scheduler/agent/memory_search.py): FAILED_PRECONDITION from the gateway
means no embedding slot is configured (logged once), anything else is logged as a warning.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import grpc

from covel.gateway.v1 import gateway_pb2
from covel.store.v1 import store_pb2
from services.scheduler.agent.memory_search import (
    EMBED_PER_SEARCH,
    QUERY_EMBED_TIMEOUT_S,
    RANKED_DEPTH,
    RECORDS_EMBED_TIMEOUT_S,
    MemoryRecord,
)
from services.scheduler.peers import Peers
from shared.logs import get_logger

log = get_logger(component="scheduler.memory_search")
# Store limits (services/store/memory_vectors.py).
PUT_MAX = 256
CANDIDATES_MAX = 10_000
# One Embed call: few enough texts for a provider's per-request token limit; a text is embedded by its
# beginning (8000 characters stay under the gateway's 32 KiB an input and most models' context).
EMBED_BATCH = 64
EMBED_TEXT_MAX_CHARS = 8000
_told_no_slot = False


class IndexedVectors:
    def __init__(self, peers: Peers, session_id: str, origin: gateway_pb2.CallOrigin | None = None) -> None:
        self._peers = peers
        self._session_id = session_id
        self._origin = origin
        # How the store ranked the last search ("sqlite-vec" or "python"), for logs and the benchmark.
        self.last_method = ""

    async def rank(self, records: list[MemoryRecord], query: str) -> list[tuple[int, float]] | None:
        embedded = await self._embed([query], QUERY_EMBED_TIMEOUT_S)
        if embedded is None:
            return None
        model, (query_vector,) = embedded
        where = {(record.source, record.key): index for index, record in enumerate(records) if record.text.strip()}
        candidates = [records[index].vector_key() for index in list(where.values())[:CANDIDATES_MAX]]
        try:
            found = await self._peers.store.SearchMemoryVectors(store_pb2.SearchMemoryVectorsRequest(
                session_id=self._session_id, model=model, query=query_vector, limit=RANKED_DEPTH, candidates=candidates))
        except grpc.aio.AioRpcError as error:
            log.warning("memory_search.index_unavailable", code=error.code().name, error=error.details())
            return None
        self.last_method = found.method
        ranking = [(where[(hit.record.source, hit.record.key)], hit.similarity) for hit in found.hits]
        fresh = [where[(key.source, key.key)] for key in found.missing[:EMBED_PER_SEARCH]]
        if fresh:
            ranking += await self._index([records[index] for index in fresh], fresh, model, query_vector)
        log.debug("memory_search.ranked", method=found.method, indexed=len(found.hits), embedded=len(fresh))
        return sorted(ranking, key=lambda pair: (-pair[1], pair[0]))

    async def _index(self, records: list[MemoryRecord], indexes: list[int], model: str,
                     query_vector: Sequence[float]) -> list[tuple[int, float]]:
        """Embed records the index lacks, keep their vectors in the store, and score them now."""
        vectors: list[list[float]] = []
        for start in range(0, len(records), EMBED_BATCH):
            texts = [record.text[:EMBED_TEXT_MAX_CHARS] for record in records[start:start + EMBED_BATCH]]
            embedded = await self._embed(texts, RECORDS_EMBED_TIMEOUT_S)
            if embedded is None or embedded[0] != model:
                break
            vectors += embedded[1]
        records, indexes = records[:len(vectors)], indexes[:len(vectors)]
        if not vectors:
            return []
        items = [store_pb2.MemoryVector(record=record.vector_key(), values=vector) for record, vector in zip(records, vectors, strict=True)]
        try:
            for start in range(0, len(items), PUT_MAX):
                await self._peers.store.PutMemoryVectors(store_pb2.PutMemoryVectorsRequest(
                    session_id=self._session_id, model=model, vectors=items[start:start + PUT_MAX]))
        except grpc.aio.AioRpcError as error:
            # Scored all the same; the next search embeds them again.
            log.warning("memory_search.index_write_failed", code=error.code().name, error=error.details())
        # The gateway's vectors are L2-normalised: the dot product is the cosine.
        return [(index, sum(map(operator.mul, query_vector, vector))) for index, vector in zip(indexes, vectors, strict=True)]

    async def _embed(self, texts: list[str], timeout_s: float) -> tuple[str, list[list[float]]] | None:
        global _told_no_slot
        request = gateway_pb2.EmbedRequest(inputs=texts, origin=self._origin)
        try:
            reply = await self._peers.gateway.Embed(request, timeout=timeout_s, wait_for_ready=True)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.FAILED_PRECONDITION:
                if not _told_no_slot:
                    log.info("memory_search.bm25_only", reason=error.details())
                    _told_no_slot = True
            else:
                log.warning("memory_search.embed_failed", code=error.code().name, error=error.details())
            return None
        return reply.model, [list(vector.values) for vector in reply.vectors]

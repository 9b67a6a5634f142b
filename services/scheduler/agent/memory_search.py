"""memory-search: a session's searchable records ranked by BM25 and by meaning, fused.

The records (the archival scope): plugin data of every `contributes.data` namespace that declares
`search.text`, the lorebook's enabled entries and the characters. Two rankings:

- keywords: BM25 over the words (shared/plugin_sdk/text_rank.py), as before;
- meaning: cosine similarity of embeddings (the gateway's `Embed`, slot "embedding"), ranked by the
  store's vector index (`SearchMemoryVectors`).

They are fused by reciprocal rank fusion (score = Σ 1 / (60 + rank)), which needs no calibration
between a BM25 score and a cosine. Without an embedding slot (FAILED_PRECONDITION from the gateway),
or when the gateway or store fails, the search is BM25 alone and says so (`method`).

Vectors are computed here, at search time, not in the store or in the commit: the store never calls
out and its commit stays one quick transaction; only a search pays for embedding, and only for the
records new or changed since the last one (the store answers which are `missing`); at most
EMBED_PER_SEARCH of them per search, the rest on the next one (they rank by keywords meanwhile).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from covel.store.v1 import store_pb2
from shared.plugin_sdk.text_rank import RankedText, rank_texts, search_excerpt

RESULTS_MAX = 20
# Each ranking contributes its best this many to the fusion.
RANKED_DEPTH = 50
RRF_K = 60
EMBED_PER_SEARCH = 256
QUERY_EMBED_TIMEOUT_S = 10.0
RECORDS_EMBED_TIMEOUT_S = 30.0
HYBRID = "hybrid"
BM25 = "bm25"


@dataclass(frozen=True)
class MemoryRecord:
    """One searchable record: where it lives (the store's vector key) and its text."""

    source: str  # "plugin_data:<pluginId>:<namespace>", "lorebook:<owner>" or "character"
    key: str
    text: str

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:32]

    def vector_key(self) -> store_pb2.MemoryRecordKey:
        return store_pb2.MemoryRecordKey(source=self.source, key=self.key, content_hash=self.content_hash)

    def where(self) -> dict[str, Any]:
        kind, _, rest = self.source.partition(":")
        if kind == "lorebook":
            return {"source": "lorebook", "owner": rest, "id": self.key}
        if kind == "character":
            return {"source": "character", "id": self.key}
        plugin_id, _, namespace = rest.partition(":")
        return {"source": "archival:plugin_data", "pluginId": plugin_id, "namespace": namespace, "key": self.key}


def plugin_data_record(plugin_id: str, namespace: str, key: str, text: str) -> MemoryRecord:
    return MemoryRecord(f"plugin_data:{plugin_id}:{namespace}", key, text)


def lorebook_records(entries: Iterable[store_pb2.LorebookEntry]) -> list[MemoryRecord]:
    return [MemoryRecord(f"lorebook:{entry.owner}", entry.id, f"{entry.title}: {entry.content}".strip(": "))
            for entry in entries]


def character_text(character: dict[str, Any]) -> str:
    """A character's words: name, aliases, then its other text fields (in the order the record has them)."""
    parts = [str(character.get("name") or character["id"])]
    aliases = character.get("aliases")
    if isinstance(aliases, list) and aliases:
        parts.append("also called " + ", ".join(str(alias) for alias in aliases))
    parts += [value for name, value in character.items()
              if name not in ("id", "name", "aliases") and isinstance(value, str) and value.strip()]
    return ". ".join(parts)


def character_records(characters: Iterable[dict[str, Any]]) -> list[MemoryRecord]:
    return [MemoryRecord("character", str(c["id"]), character_text(c)) for c in characters]


class VectorRanking(Protocol):
    async def rank(self, records: list[MemoryRecord], query: str) -> list[tuple[int, float]] | None:
        """(record index, similarity), best first; None when there is no vector search (BM25 alone)."""
        ...


async def search_memory(records: list[MemoryRecord], query: str, limit: int,
                        vectors: VectorRanking | None = None) -> dict[str, Any]:
    """The tool's answer: {"results": [...], "method": "hybrid" | "bm25"}."""
    limit = max(1, min(limit, RESULTS_MAX))
    keyword_hits = rank_texts(query, [record.text for record in records], limit=RANKED_DEPTH)
    meaning = await vectors.rank(records, query) if vectors is not None and records else None
    if meaning is None:
        return {"results": [_result(records[hit.index], query, hit, None) for hit in keyword_hits[:limit]], "method": BM25}
    keyword = {hit.index: (rank, hit) for rank, hit in enumerate(keyword_hits)}
    similar = {index: (rank, similarity) for rank, (index, similarity) in enumerate(meaning[:RANKED_DEPTH])}
    fused: dict[int, float] = {}
    for index, (rank, _) in [*keyword.items(), *similar.items()]:
        fused[index] = fused.get(index, 0.0) + 1.0 / (RRF_K + rank + 1)
    best = sorted(fused, key=lambda index: (-fused[index], index))[:limit]
    return {"results": [_result(records[i], query, keyword[i][1] if i in keyword else None, similar.get(i), fused[i]) for i in best],
            "method": HYBRID}


def _result(record: MemoryRecord, query: str, hit: RankedText | None, similar: tuple[int, float] | None,
            fused: float | None = None) -> dict[str, Any]:
    """One hit: where it is, its excerpt, `score` (BM25; the fused score in a hybrid search), `coverage`
    (how much of the query's words it has) and, in a hybrid search, `similarity` (cosine) and `match`."""
    found: dict[str, Any] = {**record.where(), "text": search_excerpt(record.text, query),
                             "score": round(fused if fused is not None else (hit.score if hit else 0.0), 4),
                             "coverage": round(hit.coverage, 3) if hit else 0.0}
    if fused is not None:
        found["similarity"] = round(similar[1], 3) if similar else None
        found["match"] = "both" if hit and similar else ("keywords" if hit else "meaning")
    return found

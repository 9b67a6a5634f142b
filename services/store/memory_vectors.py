"""memory-search's vector index: the embeddings of a session's searchable records, by embedding model.

The scheduler embeds (through the gateway) and puts the vectors here; the store never calls out, and
nothing of this runs inside a turn's commit (docs/plugins.md "Memory"). A record is named by its
source ("plugin_data:<pluginId>:<namespace>", "lorebook:<owner>", "character"), key and the hash of
the text embedded: a search passes the records it can still show with their current hashes, so a
vector of a record since changed or removed never counts, and hears back which ones need embedding.
Ranking: sqlite-vec's `vec_distance_cosine` in SQLite when the extension is loaded, else exact cosine
in Python (services/store/vector_extension.py).
"""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, delete, func, insert, select, tuple_
from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store.database import lock_session
from services.store.models import MemoryVectorRow, utcnow
from services.store.vector_extension import SQLITE_VEC
from shared.errors import invalid_argument

MODEL_MAX = 200
SOURCE_MAX = 500
KEY_MAX = 500
HASH_MAX = 128
DIMENSIONS_MAX = 4096
PUT_MAX = 256
CANDIDATES_MAX = 10_000
LIMIT_MAX = 100


def _record(record: store_pb2.MemoryRecordKey, field: str) -> None:
    for name, value, most in (("source", record.source, SOURCE_MAX), ("key", record.key, KEY_MAX),
                              ("content_hash", record.content_hash, HASH_MAX)):
        if not value or len(value) > most:
            raise invalid_argument(f"{field}.{name}", f"say 1-{most} characters")


def _vector(values: Iterable[float], field: str) -> None:
    values = list(values)
    if not 1 <= len(values) <= DIMENSIONS_MAX:
        raise invalid_argument(field, f"has {len(values)} numbers; an embedding has 1-{DIMENSIONS_MAX}")
    if not all(math.isfinite(x) for x in values):
        raise invalid_argument(field, "holds a number that is not finite (NaN or infinity)")


def _model(model: str) -> None:
    if not model or len(model) > MODEL_MAX:
        raise invalid_argument("model", f"say 1-{MODEL_MAX} characters: the embedding model that made the vectors")


def check_put(request: store_pb2.PutMemoryVectorsRequest) -> None:
    _model(request.model)
    if not 1 <= len(request.vectors) <= PUT_MAX:
        raise invalid_argument("vectors", f"has {len(request.vectors)}; put 1-{PUT_MAX} at a time")
    for index, item in enumerate(request.vectors):
        _record(item.record, f"vectors[{index}].record")
        _vector(item.values, f"vectors[{index}].values")
        if len(item.values) != len(request.vectors[0].values):
            raise invalid_argument(f"vectors[{index}].values", "differs in length from vectors[0]: one model, one length")


def check_search(request: store_pb2.SearchMemoryVectorsRequest) -> None:
    _model(request.model)
    _vector(request.query, "query")
    if len(request.candidates) > CANDIDATES_MAX:
        raise invalid_argument("candidates", f"has {len(request.candidates)}; at most {CANDIDATES_MAX}")
    for index, record in enumerate(request.candidates):
        _record(record, f"candidates[{index}]")
    if not 1 <= request.limit <= LIMIT_MAX:
        raise invalid_argument("limit", f"is {request.limit}; ask for 1-{LIMIT_MAX} hits")


def put(db: Session, request: store_pb2.PutMemoryVectorsRequest) -> int:
    """Each record's vector for this model, replacing the one it had (one transaction)."""
    lock_session(db, request.session_id)
    items = {(item.record.source, item.record.key): item for item in request.vectors}
    db.execute(delete(MemoryVectorRow).where(
        MemoryVectorRow.session_id == request.session_id, MemoryVectorRow.model == request.model,
        tuple_(MemoryVectorRow.source, MemoryVectorRow.key).in_(list(items))))
    now = utcnow()
    db.execute(insert(MemoryVectorRow), [
        {"session_id": request.session_id, "model": request.model, "source": source, "key": key,
         "content_hash": item.record.content_hash, "dimensions": len(item.values),
         "vector": array("f", item.values).tobytes(), "updated_at": now}
        for (source, key), item in items.items()])
    return len(items)


@dataclass(frozen=True)
class _Scored:
    source: str
    key: str
    content_hash: str
    similarity: float


def search(db: Session, request: store_pb2.SearchMemoryVectorsRequest, method: str) -> store_pb2.SearchMemoryVectorsResponse:
    wanted = {(c.source, c.key): c.content_hash for c in request.candidates}
    query = array("f", request.query)
    scored = _with_sqlite_vec(db, request, query) if method == SQLITE_VEC else _in_python(db, request, query)
    fresh = [s for s in scored if wanted.get((s.source, s.key)) == s.content_hash]
    fresh.sort(key=lambda s: (-s.similarity, s.source, s.key))
    found = {(s.source, s.key) for s in fresh}
    return store_pb2.SearchMemoryVectorsResponse(
        hits=[store_pb2.MemoryVectorHit(record=_key(s.source, s.key, s.content_hash), similarity=s.similarity)
              for s in fresh[:request.limit]],
        missing=[c for c in request.candidates if (c.source, c.key) not in found],
        method=method,
    )


def _key(source: str, key: str, content_hash: str) -> store_pb2.MemoryRecordKey:
    return store_pb2.MemoryRecordKey(source=source, key=key, content_hash=content_hash)


def _rows(request: store_pb2.SearchMemoryVectorsRequest, *columns: Any) -> Select[Any]:
    return select(MemoryVectorRow.source, MemoryVectorRow.key, MemoryVectorRow.content_hash, *columns).where(
        MemoryVectorRow.session_id == request.session_id, MemoryVectorRow.model == request.model,
        MemoryVectorRow.dimensions == len(request.query))


def _with_sqlite_vec(db: Session, request: store_pb2.SearchMemoryVectorsRequest, query: array) -> list[_Scored]:
    distance = func.vec_distance_cosine(MemoryVectorRow.vector, query.tobytes())
    return [_Scored(source, key, content_hash, 1.0 - float(d))
            for source, key, content_hash, d in db.execute(_rows(request, distance)) if d is not None]


def _in_python(db: Session, request: store_pb2.SearchMemoryVectorsRequest, query: array) -> list[_Scored]:
    # math.hypot: the norm in C (a generator of squares was half of each vector's time).
    query_norm = math.hypot(*query) or 1.0
    scored = []
    for source, key, content_hash, blob in db.execute(_rows(request, MemoryVectorRow.vector)):
        vector = array("f")
        vector.frombytes(blob)
        norm = math.hypot(*vector) or 1.0
        scored.append(_Scored(source, key, content_hash, sum(map(operator.mul, query, vector)) / (query_norm * norm)))
    return scored

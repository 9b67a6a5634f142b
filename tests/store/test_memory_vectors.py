"""memory-search's vector index: put, ranked search among the candidates, stale and missing records, bad input."""

from __future__ import annotations

import math

import grpc

from covel.store.v1 import store_pb2
from services.store.memory_vectors import PUT_MAX
from services.store.vector_extension import PYTHON, SQLITE_VEC, load_sqlite_vec
from tests.store.helpers import expect_error, new_session

MODEL = "embed-test"


def key(source: str, name: str, content_hash: str = "h1") -> store_pb2.MemoryRecordKey:
    return store_pb2.MemoryRecordKey(source=source, key=name, content_hash=content_hash)


def unit(*values: float) -> list[float]:
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


def put(session_id: str, *items: tuple[store_pb2.MemoryRecordKey, list[float]], model: str = MODEL):
    return store_pb2.PutMemoryVectorsRequest(session_id=session_id, model=model, vectors=[
        store_pb2.MemoryVector(record=record, values=values) for record, values in items])


def search(session_id: str, query: list[float], *candidates: store_pb2.MemoryRecordKey, limit: int = 5, model: str = MODEL):
    return store_pb2.SearchMemoryVectorsRequest(session_id=session_id, model=model, query=query, candidates=candidates, limit=limit)


async def test_nearest_first_among_the_candidates_and_what_is_missing(stub):
    session = await new_session(stub)
    lamp, bread, gone = key("plugin_data:memory:memories", "m1"), key("lorebook:world", "bakery"), key("character", "old")
    written = await stub.PutMemoryVectors(put(session.id, (lamp, unit(1, 0.1, 0)), (bread, unit(0, 1, 0)), (gone, unit(1, 0, 0))))
    assert written.written == 3
    new = key("character", "tobin")
    found = await stub.SearchMemoryVectors(search(session.id, unit(1, 0, 0), lamp, bread, new))
    assert [(h.record.source, h.record.key) for h in found.hits] == [("plugin_data:memory:memories", "m1"), ("lorebook:world", "bakery")]
    assert found.hits[0].similarity > 0.99 and abs(found.hits[1].similarity) < 1e-6
    assert [m.key for m in found.missing] == ["tobin"], "not a candidate: `old` is left out; `tobin` has no vector"
    assert found.method in (SQLITE_VEC, PYTHON)
    # A record whose text changed (a new hash) counts as missing until its vector is put again.
    changed = key("plugin_data:memory:memories", "m1", "h2")
    again = await stub.SearchMemoryVectors(search(session.id, unit(1, 0, 0), changed, bread, limit=1))
    assert [h.record.key for h in again.hits] == ["bakery"] and [m.key for m in again.missing] == ["m1"]
    await stub.PutMemoryVectors(put(session.id, (changed, unit(0, 0, 1))))
    replaced = await stub.SearchMemoryVectors(search(session.id, unit(0, 0, 1), changed, bread))
    assert replaced.hits[0].record.content_hash == "h2" and not replaced.missing
    # Another model's vectors are another index.
    other = await stub.SearchMemoryVectors(search(session.id, unit(1, 0, 0), lamp, model="other-model"))
    assert not other.hits and [m.key for m in other.missing] == ["m1"]


async def test_vectors_go_with_their_session(stub):
    session = await new_session(stub)
    record = key("character", "tobin")
    await stub.PutMemoryVectors(put(session.id, (record, unit(1, 1))))
    await stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id, reason="deleted"))
    await expect_error(grpc.StatusCode.NOT_FOUND, stub.PutMemoryVectors(put(session.id, (record, unit(1, 1)))))


async def test_mistakes_are_refused_by_field(stub):
    session = await new_session(stub)
    record = key("character", "tobin")
    for request, field in (
        (put(session.id, (record, unit(1, 0)), model=""), "model"),
        (put(session.id), "vectors"),
        (put(session.id, *[(key("character", f"c{i}"), [1.0]) for i in range(PUT_MAX + 1)]), "vectors"),
        (put(session.id, (key("", "x"), [1.0])), "vectors[0].record.source"),
        (put(session.id, (record, [])), "vectors[0].values"),
        (put(session.id, (record, [math.nan])), "vectors[0].values"),
        (put(session.id, (record, [1.0, 0.0]), (key("character", "b"), [1.0])), "vectors[1].values"),
    ):
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.PutMemoryVectors(request))
        assert error.details().startswith(f"{field}:"), error.details()
    for request, field in ((search(session.id, [], record), "query"), (search(session.id, [1.0], record, limit=0), "limit"),
                           (search(session.id, [1.0], key("character", "")), "candidates[0].key")):
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.SearchMemoryVectors(request))
        assert error.details().startswith(f"{field}:"), error.details()


def test_sqlite_vec_loads_where_python_can_load_extensions():
    import sqlite3

    connection = sqlite3.connect(":memory:")
    loaded = load_sqlite_vec(connection)
    assert loaded == hasattr(connection, "enable_load_extension"), "a Python that can load extensions gets sqlite-vec"
    if loaded:
        assert connection.execute("SELECT vec_distance_cosine(vec_f32('[1, 0]'), vec_f32('[0, 1]'))").fetchone()[0] == 1.0


def test_sqlite_vec_and_python_rank_alike(tmp_path):
    """In process: the extension's ranking (where this Python loads it: Debian's does) equals the Python fallback's."""
    from sqlalchemy.orm import Session

    from services.store import memory_vectors
    from services.store.database import create_store_engine, migrate
    from services.store.vector_extension import vector_method

    engine = create_store_engine(f"sqlite:///{tmp_path / 'vectors.db'}")
    migrate(engine)
    methods = sorted({PYTHON, vector_method(engine)})
    items = [(key("s", name), values) for name, values in (("a", [1.0, 0.1, 0.0]), ("b", [0.0, 1.0, 0.0]), ("c", [-1.0, 0.2, 0.3]))]
    with engine.connect() as connection:
        connection.connection.driver_connection.execute("PRAGMA foreign_keys = OFF")  # no session row needed here
        with Session(bind=connection) as db:
            rows = put("s1", *items)
            db.execute(memory_vectors.insert(memory_vectors.MemoryVectorRow), [
                {"session_id": "s1", "model": MODEL, "source": v.record.source, "key": v.record.key, "content_hash": "h1",
                 "dimensions": 3, "vector": memory_vectors.array("f", v.values).tobytes(), "updated_at": memory_vectors.utcnow()}
                for v in rows.vectors])
            request = search("s1", [1.0, 0.0, 0.0], *(record for record, _ in items))
            ranked = {method: [(h.record.key, round(h.similarity, 5)) for h in memory_vectors.search(db, request, method).hits]
                      for method in methods}
    engine.dispose()
    assert ranked[PYTHON][0] == ("a", 0.99504) and [k for k, _ in ranked[PYTHON]] == ["a", "b", "c"]
    assert all(found == ranked[PYTHON] for found in ranked.values()), ranked

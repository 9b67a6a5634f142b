"""memory-search recall: top-5 recall of BM25 alone vs hybrid (BM25 + vectors, fused), on a labelled set.

`python -m bench.memory_recall`: a small story's memories (plugin data), lorebook entries and characters,
and queries labelled with the records each should find, of three kinds:

- keywords: the query shares words with its target;
- word forms: a paraphrase sharing no word with its target, only stems and parts of words
  ("who keeps the light" -> "Old Tobin tends the lighthouse lamp"; "drowning at the reefs" -> "drowned off the north reef");
- synonyms: a paraphrase sharing nothing ("who looks after the beacon"), which only a real embedding model can find.

Both searches run the kernel's code (services/scheduler/agent/memory_search.py) over the same records; the
hybrid one embeds through a real gateway (the offline scripted embedder, unless COVEL_GATEWAY_* configure an
embedding slot) and ranks with a real store's vector index (SQLite in a temporary folder). Recall of a query:
the share of its targets among the top 5. Writes bench/results/memory_recall.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.launcher import free_port_addrs
from services.gateway.server import start as start_gateway
from services.gateway.settings import GatewaySettings
from services.scheduler.agent.indexed_vectors import IndexedVectors
from services.scheduler.agent.memory_search import (
    MemoryRecord,
    character_records,
    plugin_data_record,
    search_memory,
)
from services.store.server import start as start_store
from services.store.server import wait_closed
from services.store.settings import StoreSettings
from shared.logs import configure_logging
from tests.support.identities import bare_channel_as, service_tls

RESULTS = Path(__file__).parent / "results"
TOP = 5

MEMORIES = {
    "lamp": "Old Tobin tends the lighthouse lamp every night.",
    "lens": "The lighthouse lens was stolen three nights ago.",
    "drown": "Ossa's brother drowned off the north reef in the winter storm.",
    "debt": "Mara owes the harbourmaster forty silver crowns.",
    "vault": "The archivist hid the vault key beneath the chapel floor.",
    "buoy": "The fishermen refuse to sail past the black buoy.",
    "wreck": "A merchant ship wrecked on the shoals carrying Verrin spices.",
    "bread": "The baker's daughter secretly bakes bread for the smugglers.",
    "bell": "The chapel bell rings by itself at midnight.",
    "map": "Wren found a torn map showing a cave under the cliffs.",
    "gulls": "Gulls circle the salt flats before a storm arrives.",
    "oath": "Captain Hale swore an oath never to return to Saltmere.",
    "well": "Someone poisoned the well in the lower town.",
    "singer": "A blind singer at the inn knows every sailor's name.",
    "coin": "Wren paid the ferryman with a counterfeit coin.",
    "letter": "A sealed letter from the governor arrived for Mara.",
    "cannery": "The cannery burned down last spring and nobody was blamed.",
    "twins": "The miller's twins vanished on the night of the festival.",
    "whale": "Whalers brought a white whale's tooth to the market.",
    "herbs": "Sister Agna grows healing herbs in the abbey garden.",
    "caves": "Smugglers use the sea caves at low tide.",
    "tax": "The governor doubled the salt tax this year.",
    "dog": "A three-legged dog follows Wren around the docks.",
    "ring": "Mara pawned her mother's silver ring at the market.",
}
LORE = {
    "abbey": "The Salt Abbey: the sisters there take in the sick and the lost.",
    "reef": "The North Reef: sharp rocks hidden at high water; many boats lie beneath it.",
}
CHARACTERS = [
    {"id": "tobin", "name": "Old Tobin", "description": "The lighthouse keeper, gruff and loyal."},
    {"id": "mara", "name": "Mara", "description": "A pawnbroker with more debts than friends."},
]
# (query, kind, targets as "memory:<key>", "lore:<id>" or "character:<id>")
QUERIES = [
    ("stolen lighthouse lens", "keywords", ["memory:lens"]),
    ("who poisoned the well", "keywords", ["memory:well"]),
    ("the chapel bell at midnight", "keywords", ["memory:bell"]),
    ("Captain Hale oath", "keywords", ["memory:oath"]),
    ("counterfeit coin for the ferryman", "keywords", ["memory:coin"]),
    ("white whale tooth", "keywords", ["memory:whale"]),
    ("salt tax", "keywords", ["memory:tax"]),
    ("who keeps the light", "word forms", ["memory:lamp", "character:tobin"]),
    ("drowning at the reefs", "word forms", ["memory:drown", "lore:reef"]),
    ("harbour debts", "word forms", ["memory:debt"]),
    ("shipwreck with spice cargo", "word forms", ["memory:wreck"]),
    ("baking for smuggling", "word forms", ["memory:bread"]),
    ("canneries burning", "word forms", ["memory:cannery"]),
    ("vanishing twin children", "word forms", ["memory:twins"]),
    ("herbal healers", "word forms", ["memory:herbs", "lore:abbey"]),
    ("whaling trade", "word forms", ["memory:whale"]),
    ("poisoning wells", "word forms", ["memory:well"]),
    ("mapped caverns on a cliffside", "word forms", ["memory:map"]),
    ("singing for sailors", "word forms", ["memory:singer"]),
    ("pawning rings", "word forms", ["memory:ring"]),
    ("who looks after the beacon", "synonyms", ["memory:lamp", "character:tobin"]),
    ("the drinking water was contaminated", "synonyms", ["memory:well"]),
    ("a vessel ran aground", "synonyms", ["memory:wreck"]),
    ("kids disappeared during celebrations", "synonyms", ["memory:twins"]),
]
KINDS = ("keywords", "word forms", "synonyms")


def records() -> list[MemoryRecord]:
    found = [plugin_data_record("memory", "memories", key, text) for key, text in MEMORIES.items()]
    found += [MemoryRecord("lorebook:world", key, text) for key, text in LORE.items()]
    return found + character_records(CHARACTERS)


def label(hit: dict) -> str:
    if hit["source"] == "lorebook":
        return f"lore:{hit['id']}"
    if hit["source"] == "character":
        return f"character:{hit['id']}"
    return f"memory:{hit['key']}"


def recall(found: list[str], targets: list[str]) -> float:
    return sum(1 for target in targets if target in found[:TOP]) / len(targets)


async def measure(folder: Path) -> dict:
    addrs = free_port_addrs()
    gateway = await start_gateway(GatewaySettings(gateway_addr=addrs["gateway"], log_level="warning", **service_tls("gateway")))
    store = await start_store(StoreSettings(store_addr=addrs["store"], data_dir=folder, log_level="warning", **service_tls("store")))
    channels = [bare_channel_as(addrs["gateway"], "scheduler"), bare_channel_as(addrs["store"], "scheduler")]
    try:
        peers = SimpleNamespace(gateway=gateway_pb2_grpc.LlmGatewayStub(channels[0]), store=store_pb2_grpc.TransactionalStoreStub(channels[1]))
        session = (await peers.store.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session()))).session
        vectors = IndexedVectors(peers, session.id)  # type: ignore[arg-type]
        items = records()
        rows, methods, hybrid_ms = [], set(), []
        for query, kind, targets in QUERIES:
            bm25 = await search_memory(items, query, TOP)
            started = time.perf_counter()
            hybrid = await search_memory(items, query, TOP, vectors)
            hybrid_ms.append((time.perf_counter() - started) * 1000)
            methods.add(f"{hybrid['method']} ({vectors.last_method or 'no vectors'})")
            rows.append({"query": query, "kind": kind, "targets": targets,
                         "bm25": [label(h) for h in bm25["results"]], "hybrid": [label(h) for h in hybrid["results"]]})
        slots = {s.slot: f"{s.provider}:{s.model}" for s in (await peers.gateway.ListSlots(gateway_pb2.ListSlotsRequest())).slots}
    finally:
        for channel in channels:
            await channel.close()
        await gateway.stop(0)
        await store.stop(0)
        await wait_closed()
    return {"rows": rows, "methods": sorted(methods), "hybrid_ms": hybrid_ms, "slots": slots}


def summarize(rows: list[dict]) -> dict:
    by_kind = {}
    for kind in (*KINDS, "all"):
        chosen = [row for row in rows if kind in ("all", row["kind"])]
        by_kind[kind] = {"queries": len(chosen),
                         "bm25": round(sum(recall(r["bm25"], r["targets"]) for r in chosen) / len(chosen), 3),
                         "hybrid": round(sum(recall(r["hybrid"], r["targets"]) for r in chosen) / len(chosen), 3)}
    return by_kind


def main() -> None:
    configure_logging("bench", "warning", "console")
    with tempfile.TemporaryDirectory(prefix="cvmr") as folder:
        measured = asyncio.run(measure(Path(folder)))
    recall_by_kind = summarize(measured["rows"])
    result = {
        "top": TOP,
        "records": len(records()),
        "recall": recall_by_kind,
        "hybrid_method": measured["methods"],
        "hybrid_search_ms_p50": round(sorted(measured["hybrid_ms"])[len(measured["hybrid_ms"]) // 2], 2),
        "first_search_ms": round(measured["hybrid_ms"][0], 2),
        "embedding": measured["slots"].get("embedding", "scripted (the default slot is the scripted model)"),
        "queries": measured["rows"],
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "memory_recall.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"memory-search top-{TOP} recall, {result['records']} records, {len(QUERIES)} queries "
          f"(search: {', '.join(result['hybrid_method'])}; load {result['load_average'][0]:.2f})")
    print(f"{'queries':<12} {'n':>3} {'BM25':>6} {'hybrid':>7}")
    for kind, row in recall_by_kind.items():
        print(f"{kind:<12} {row['queries']:>3} {row['bm25']:>6.2f} {row['hybrid']:>7.2f}")
    print(f"hybrid search p50 {result['hybrid_search_ms_p50']} ms (first search, embedding every record: {result['first_search_ms']} ms)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

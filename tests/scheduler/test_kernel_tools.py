"""The tools the kernel answers itself: datasets, characters, memory-search (unified results)."""

from __future__ import annotations

import json

from services.scheduler.catalogue import Package
from services.scheduler.execution.kernel_tools import (
    KernelTools,
    add_character_tools,
    add_dataset_tools,
    add_memory_search,
    dataset_key,
    provided_dataset_tools,
    wanted_datasets,
)
from services.scheduler.execution.plugin_data_view import PluginDataView
from shared.manifest.runtime import Dataset
from shared.plugin_sdk.text_rank import rank_texts, search_terms
from tests.scheduler.compiled import compiled_package

ITEM_SCHEMA = {"type": "object", "required": ["id", "name", "count"], "properties": {
    "id": {"type": "string"}, "name": {"type": "string"}, "count": {"type": "integer", "minimum": 0}}}


def datasets_package(datasets: dict, runtime_datasets: list) -> Package:
    """Package inventory declaring `datasets` (schema item.json), its runtime inventory/keeper importing `runtime_datasets`."""
    return compiled_package("inventory", {"inventory/keeper": {"agent": {"tools": {"datasets": runtime_datasets}}}},
                            package={"contributes": {"datasets": datasets}}, files={"item.json": json.dumps(ITEM_SCHEMA)})


def dataset_tools(tmp_path, committed=None, **declaration):
    package = datasets_package({"items": {"schema": "item.json", "key": "id", **declaration}}, ["items"])
    declared = package.contributes.datasets or {}

    async def load(namespace):
        return dict(committed or {})

    view = PluginDataView("inventory", load)
    tools = KernelTools()
    manifest = package.runtimes[0].manifest
    add_dataset_tools(tools, wanted_datasets(manifest, declared), declared, package.root_dir, view)
    return tools, view


def declared_dataset(**declaration) -> Dataset:
    return (datasets_package({"items": {"schema": "item.json", **declaration}}, []).contributes.datasets or {})["items"]


async def call(tools, tool, **args):
    return json.loads(await tools.call({"name": tool, "arguments": json.dumps(args)}))


def test_dataset_tool_kinds_follow_ops():
    assert provided_dataset_tools(declared_dataset()) == ["get", "list", "upsert", "update"]
    assert provided_dataset_tools(declared_dataset(ops=["set"])) == ["get", "list", "upsert"]
    assert provided_dataset_tools(declared_dataset(ops=["inc", "append"])) == ["get", "list", "update"]
    assert provided_dataset_tools(declared_dataset(tools=["get"])) == ["get"]
    # "nope" is in the runtime's package but not among the datasets the scheduler was given.
    package = datasets_package({"items": {"schema": "item.json", "ops": ["set"]}, "notes": {"schema": "item.json"},
                                "nope": {"schema": "item.json"}}, [{"dataset": "notes", "tools": ["get", "update"]}, "items", "nope"])
    declared = {name: dataset for name, dataset in (package.contributes.datasets or {}).items() if name != "nope"}
    assert wanted_datasets(package.runtimes[0].manifest,
                           declared) == {"notes": ["get", "update"], "items": ["get", "list", "upsert"]}
    assert dataset_key("  Old_Lamp  Oil ") == "old-lamp-oil"


async def test_dataset_tools_read_write_and_validate(tmp_path):
    committed = {("items", "lamp"): {"id": "lamp", "name": "Lamp", "count": 1}}
    tools, view = dataset_tools(tmp_path, committed)
    assert set(tools.names()) == {"items-get", "items-list", "items-upsert", "items-update"}
    assert tools.is_read_only("items-get") and not tools.is_read_only("items-upsert")

    got = await call(tools, "items-get", key="Lamp")  # found under the normalised key
    assert got == {"ok": True, "data": {"key": "lamp", "value": {"id": "lamp", "name": "Lamp", "count": 1}}}
    missing = await call(tools, "items-get", key="rope")
    assert missing["ok"] is False and missing["error"]["code"] == "not-found" and "items-list" in missing["error"]["hint"]

    # The key comes from the record's key field; a record that breaks the schema is refused before any write.
    bad = await call(tools, "items-upsert", value={"id": "rope", "name": "Rope", "count": -1})
    assert bad["ok"] is False and bad["error"]["code"] == "invalid-input" and "count" in bad["error"]["message"]
    assert view.writes == []
    made = await call(tools, "items-upsert", value={"id": "rope", "name": "Rope", "count": 2})
    assert made["ok"] is True
    updated = await call(tools, "items-update", key="lamp", operations=[{"op": "inc", "path": "/count", "by": 2}])
    assert updated["data"]["value"]["count"] == 3
    # An update whose result breaks the schema is refused too.
    broken = await call(tools, "items-update", key="lamp", operations=[{"op": "set", "path": "/count", "value": "many"}])
    assert broken["error"]["code"] == "invalid-input"
    assert [w["type"] for w in view.writes] == ["plugin.data", "plugin.data.update"]

    # Reads see this execution's own writes.
    listed = await call(tools, "items-list")
    assert listed["data"]["total"] == 2 and [i["key"] for i in listed["data"]["items"]] == ["lamp", "rope"]
    wrong = await call(tools, "items-list", limit="ten")
    assert wrong["ok"] is False and wrong["error"]["code"] == "invalid-input"


async def test_dataset_ops_restrict_update_operations(tmp_path):
    tools, view = dataset_tools(tmp_path, {("items", "lamp"): {"id": "lamp", "name": "Lamp", "count": 1}}, ops=["set", "inc"])
    refused = await call(tools, "items-update", key="lamp", operations=[{"op": "delete", "path": "/name"}])
    assert refused["error"]["code"] == "invalid-input" and "delete" in refused["error"]["message"]
    assert view.writes == []


async def test_character_tools_resolve_by_id_name_and_alias():
    characters = [{"id": "npc-lin", "name": "Lin Yao", "aliases": ["the archivist"], "description": "Keeps the records."},
                  {"id": "npc-mara", "name": "Mara"}, {"id": "npc-mara-2", "name": "Mara"}]

    async def load():
        return characters

    tools = KernelTools()
    add_character_tools(tools, load)
    listed = await call(tools, "list-characters")
    assert [c["id"] for c in listed["data"]["characters"]] == ["npc-lin", "npc-mara", "npc-mara-2"]
    assert (await call(tools, "get-character", name="The Archivist"))["data"]["id"] == "npc-lin"
    assert (await call(tools, "get-character", name="npc-mara"))["data"]["name"] == "Mara"
    assert (await call(tools, "get-character", name="Mara"))["error"]["code"] == "ambiguous"
    assert (await call(tools, "get-character", name="Nobody"))["error"]["code"] == "not-found"


async def test_memory_search_tool_and_ranking():
    texts = ["The archivist hid the key under the old city gate.", "Mara likes apples.", "旧城门下埋着钥匙。", ""]
    hits = rank_texts("where is the key hidden?", texts)
    assert hits[0].index == 0 and 0 < hits[0].coverage <= 1 and hits[0].matched >= 2
    assert rank_texts("城门", texts)[0].index == 2
    assert search_terms("旧城门") == ["旧城", "城门"]
    assert rank_texts("apples", texts, min_coverage=0.5)[0].index == 1
    assert rank_texts("", texts) == []

    seen = []

    async def search(query, limit):
        seen.append((query, limit))
        return {"results": [{"source": "archival:plugin_data", "text": "hit"}], "method": "bm25"}

    tools = KernelTools()
    add_memory_search(tools, search)
    result = await call(tools, "memory-search", query="key", limit=3)
    assert result["data"]["results"][0]["text"] == "hit" and seen == [("key", 3)]
    assert (await call(tools, "memory-search"))["error"]["code"] == "invalid-input"

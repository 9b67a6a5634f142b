"""Resolution rules added to the first version: event topics, approvals, world requiredContracts
(unmet), unavailable members, and resolve_confirmed_session_plugins for a saved session."""

from __future__ import annotations

from pathlib import Path

from services.registry.catalogue import scan
from services.registry.session_resolution import resolve_confirmed_session_plugins, resolve_session_plugins
from tests.registry.conftest import write_plugin

ENTRY = {"server/index.py": "def register(covel):\n    pass\n"}


def catalogue(tmp_path: Path, plugins: dict[str, str], *, with_entry: tuple[str, ...] = (), builtin: bool = False):
    """The packages of one folder: community, or (`builtin`) the operator's, where `kind: core` counts."""
    for plugin_id, frontmatter in plugins.items():
        write_plugin(tmp_path, plugin_id, frontmatter, files=ENTRY if plugin_id in with_entry else None)
    return scan([tmp_path], builtin_dirs=[tmp_path] if builtin else [])


def codes(rejections) -> dict[str, tuple[str, str]]:
    return {item.plugin_id: (item.code, item.contract or item.topic) for item in rejections}


def test_one_declarer_per_event_topic_later_accepted_is_rejected(tmp_path: Path) -> None:
    events = "contributes:\n  events: [quest.started, quest.done]"
    packages = catalogue(tmp_path, {"a-quests": events, "b-quests": events, "c-core": "kind: core\ncontributes:\n  events: [quest.done]"},
                         builtin=True)
    result = resolve_session_plugins(packages, ["b-quests", "a-quests"], [])
    # Explicit requests before core; among requests, request order.
    assert result.active == ["b-quests"]
    rejected = {item.plugin_id: item for item in result.rejected}
    assert (rejected["a-quests"].code, rejected["a-quests"].topic) == ("event-topic-conflict", "quest.started")
    assert "a-quests" in rejected["a-quests"].reason and "b-quests" in rejected["a-quests"].reason
    assert (rejected["c-core"].code, rejected["c-core"].topic) == ("event-topic-conflict", "quest.done")


def test_explicit_request_wins_a_topic_over_an_auto_added_provider(tmp_path: Path) -> None:
    packages = catalogue(
        tmp_path,
        {
            "consumer": "requires: [lore@1]\ncontributes:\n  events: [lore.found]",
            "lore": "provides: [lore@1]\ncontributes:\n  events: [lore.found]",
        },
    )
    result = resolve_session_plugins(packages, ["consumer"], [])
    # The auto-added provider loses the topic, so the consumer loses its provider too.
    assert codes(result.rejected) == {"lore": ("event-topic-conflict", "lore.found"), "consumer": ("missing-provider", "lore@1")}
    assert result.active == []


def test_unapproved_community_provider_with_code_is_not_auto_added(tmp_path: Path) -> None:
    packages = catalogue(
        tmp_path, {"consumer": "requires: [lore@1]", "lore": "provides: [lore@1]"}, with_entry=("lore",)
    )
    result = resolve_session_plugins(packages, ["consumer"], [], approved=[])
    assert codes(result.rejected) == {"consumer": ("approval-required", "lore@1")}
    assert codes(result.unavailable) == {"consumer": ("approval-required", "lore@1")}
    approved = resolve_session_plugins(packages, ["consumer"], [], approved=["lore"])
    assert approved.active == ["consumer", "lore"] and approved.auto_added == ["lore"]
    # Approvals not given at all: not consulted (the scheduler gates code separately).
    assert resolve_session_plugins(packages, ["consumer"], []).active == ["consumer", "lore"]
    # An explicitly requested unapproved plugin stays: its code just does not run until approved.
    assert resolve_session_plugins(packages, ["lore"], [], approved=[]).active == ["lore"]


def test_world_required_contracts_add_providers_and_list_unmet(tmp_path: Path) -> None:
    packages = catalogue(
        tmp_path,
        {
            "clock": "provides: [world-time@1]",
            "dims-a": "provides: [dims@1]",
            "dims-b": "provides: [dims@1]",
            "coded": "provides: [coded@1]",
            "gone": "provides: [gone@1]",
        },
        with_entry=("coded",),
    )
    result = resolve_session_plugins(
        packages,
        [],
        ["gone"],
        approved=[],
        required_contracts=["world-time@1", "dims@1", "coded@1", "gone@1", "nobody@1"],
    )
    assert result.active == ["clock"] and result.auto_added == ["clock"]
    unmet = {item.contract: (item.code, item.providers) for item in result.unmet}
    assert unmet == {
        "dims@1": ("ambiguous-provider", ("dims-a", "dims-b")),
        "coded@1": ("approval-required", ("coded",)),
        "gone@1": ("excluded", ("gone",)),
        "nobody@1": ("missing-provider", ()),
    }
    assert result.rejected == []


def test_missing_provider_of_requested_and_core_is_unavailable_not_fatal(tmp_path: Path) -> None:
    packages = catalogue(tmp_path, {"needs-x": "requires: [x@1]", "core-needs-y": "kind: core\nrequires: [y@1]", "fine": ""}, builtin=True)
    result = resolve_session_plugins(packages, ["needs-x", "fine"], [])
    assert result.active == ["fine"]
    assert codes(result.unavailable) == {"needs-x": ("missing-provider", "x@1"), "core-needs-y": ("missing-provider", "y@1")}


def test_confirmed_set_adds_nothing_and_lists_unavailable_members(tmp_path: Path) -> None:
    packages = catalogue(
        tmp_path,
        {
            "new-core": "kind: core",
            "consumer": "requires: [lore@1]",
            "lore": "provides: [lore@1]",
            "broken": "kind: sometimes",
            "rival": "conflicts: [lore@1]",
        },
    )
    confirmed = ["consumer", "ghost", "broken", "lore", "rival"]
    result = resolve_confirmed_session_plugins(packages, confirmed)
    # No new core plugin, no auto-added provider; the set keeps its own order; the later of two
    # conflicting members waits.
    assert result.runnable == ["consumer", "lore"]
    assert codes(result.unavailable) == {
        "ghost": ("not-found", ""),
        "broken": ("failed-to-load", ""),
        "rival": ("conflict", "lore@1"),
    }
    # Without its provider in the set, the consumer waits (the provider is not pulled in).
    result = resolve_confirmed_session_plugins(packages, ["consumer"])
    assert result.runnable == [] and codes(result.unavailable) == {"consumer": ("missing-provider", "lore@1")}
    assert confirmed == ["consumer", "ghost", "broken", "lore", "rival"]


def test_providers_of_a_contract_publish_one_schema(tmp_path: Path) -> None:
    contract = "contracts:\n  lore@1:\n    schema: ./lore.json\nprovides: [lore@1]"
    write_plugin(tmp_path, "a-lore", contract, files={"lore.json": '{"type": "object"}'})
    write_plugin(tmp_path, "b-lore", contract, files={"lore.json": '{"type": "object"}'})
    write_plugin(tmp_path, "c-lore", contract, files={"lore.json": '{"type": "array"}'})
    packages = {package.id: package for package in scan([tmp_path])}
    assert packages["a-lore"].loaded and packages["b-lore"].loaded
    [diagnostic] = packages["c-lore"].diagnostics
    assert not packages["c-lore"].loaded
    assert (diagnostic.code, diagnostic.field_path) == ("contract-schema-divergent", "contracts.lore@1.schema")
    assert "a-lore" in diagnostic.message


def test_a_one_provider_extension_point_takes_one_plugin_and_a_core_one_is_the_default(tmp_path: Path) -> None:
    """history.compact@2 has one provider per session: a requested compactor replaces the core one (its default
    provider), and of two requested ones the later is rejected."""
    compactor = "contributes:\n  extensions: [history.compact@2/{name}]"
    for plugin_id, name, kind in (("core-compactor", "core", "kind: core\n"), ("b-compactor", "b", ""), ("a-compactor", "a", "")):
        entry = f"def register(covel):\n    covel.provide_extension('history.compact@2', '{name}', lambda ctx, payload: {{}})\n"
        write_plugin(tmp_path, plugin_id, kind + compactor.format(name=name), files={"server/index.py": entry})
    packages = scan([tmp_path], builtin_dirs=[tmp_path])
    assert resolve_session_plugins(packages, [], []).active == ["core-compactor"], "alone, the core one compacts"
    result = resolve_session_plugins(packages, ["b-compactor", "a-compactor"], [])
    assert result.active == ["b-compactor"]
    assert codes(result.rejected) == {"core-compactor": ("superseded", "history.compact@2"), "a-compactor": ("conflict", "history.compact@2")}
    assert "only the default provider" in next(r.reason for r in result.rejected if r.plugin_id == "core-compactor")

"""Plugin cards (services/registry/plugin_cards.py): each installed plugin as the preparation page shows it —
translated name, derived tags, author/license/homepage, whether it narrates, and its diagnostics sorted into
tasks that do not run and fields that were not read, with the file and field relative to the plugin."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict

from services.registry.catalogue import scan
from services.registry.plugin_cards import plugin_cards
from shared.settings import REPO_ROOT

FIXTURES = Path(__file__).parent / "fixtures"

AUTHORED = """\
---
displayName: Lantern
description: Lights the way.
tags: [mode:night, cost:free]
license: MIT
homepage: https://lantern.example.org/
author:
  name: Ada
  links: [{label: Code, url: "https://xn--bcher-kva.example/lantern"}]
flavour: smoky
---
"""


@pytest.fixture(scope="module")
def packages(tmp_path_factory) -> list:
    """The builtin plugins and three of the test's, scanned once (a scan takes seconds on a loaded machine)."""
    tmp_path = tmp_path_factory.mktemp("cards")
    for name in ("unknown-top-level", "missing-runtime-md"):
        for plugin in (FIXTURES / name).iterdir():
            shutil.copytree(plugin, tmp_path / plugin.name)
    (tmp_path / "lantern").mkdir()
    (tmp_path / "lantern" / "PLUGIN.md").write_text(AUTHORED, encoding="utf-8")
    (tmp_path / "lantern" / "locales").mkdir()
    (tmp_path / "lantern" / "locales" / "zh.yaml").write_text("PLUGIN.md:\n  displayName: 灯笼\n", encoding="utf-8")
    return scan([REPO_ROOT / "plugins", tmp_path])


def cards(packages: list, locale: str = "en") -> dict[str, dict]:
    return {card.id: MessageToDict(card, preserving_proto_field_name=True) for card in plugin_cards(packages, locale)}


def test_a_card_says_who_made_the_plugin_and_what_of_it_is_not_read(packages) -> None:
    found = cards(packages)
    lantern = found["lantern"]
    assert (lantern["name"], lantern["description"], lantern["license"], lantern["homepage"]) == (
        "Lantern",
        "Lights the way.",
        "MIT",
        "https://lantern.example.org/",
    )
    assert lantern["author"] == {"name": "Ada", "links": [{"label": "Code", "url": "https://xn--bcher-kva.example/lantern"}]}
    assert lantern["tags"][0] == "mode:night" and "cost:free" not in lantern["tags"], (
        "an author's cost: tag is the kernel's to derive"
    )
    [ignored] = lantern["ignored"]
    assert (ignored["code"], ignored["file"], ignored["field_path"]) == ("unknown-field", "PLUGIN.md", "flavour")
    assert "unrunnable" not in lantern and lantern["loaded"] is True

    dropped = found["missing-md"]
    [task] = dropped["unrunnable"]
    assert task["code"] == "runtime-manifest-missing" and task["file"].startswith("runtimes/notes"), task
    assert not task["file"].startswith("/"), "paths are relative to the plugin"
    assert found["unknown-top-level"]["ignored"][0]["field_path"] == "flavour"


def test_narrators_and_the_cost_tags_the_kernel_derives(packages) -> None:
    found = cards(packages)
    narrator = found["narrator"]
    assert narrator["story"] is True and narrator["kind"] == "core" and "cost:llm" in narrator["tags"]
    assert "narrative-engine@2" in narrator["provides"]
    narrators = {plugin_id for plugin_id, card in found.items() if card.get("story")}
    assert "narrator" in narrators and "inventory" not in narrators
    assert [tag for tag in found["world-time"]["tags"] if tag.startswith("cost:")] == ["cost:function"], found["world-time"][
        "tags"
    ]
    assert sorted(found) == list(found), "in id order"


def test_a_card_reads_in_the_players_language(packages) -> None:
    assert cards(packages, "zh")["lantern"]["name"] == "灯笼"

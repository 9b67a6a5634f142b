"""docs/hookspecs.md's table is the SDK's hookspecs and the hooks service's mapping (covel_cli/hookspec_doc_tables.py)."""

from __future__ import annotations

import pytest

from covel_cli import doc_tables, hookspec_doc_tables
from services.hooks.common.hookspec_events import EVENTS_OF_HOOK, NOT_SUPPORTED_YET
from shared.plugin_sdk.hookspecs import HOOK_NAMES
from shared.settings import REPO_ROOT

HOOKSPECS_DOC = REPO_ROOT / "docs" / "hookspecs.md"


def test_the_table_is_up_to_date_and_rewritten_by_doc_tables() -> None:
    table = doc_tables.blocks_in(HOOKSPECS_DOC.read_text(encoding="utf-8")).get("hookspecs")
    assert table is not None, "docs/hookspecs.md has no `<!-- generated: hookspecs -->` block"
    assert table == doc_tables.generated("hookspecs"), f"docs/hookspecs.md is out of date: run {doc_tables.WRITE_COMMAND}"
    assert HOOKSPECS_DOC in doc_tables.WORLD_DOC_FILES, "doc_tables --write must rewrite docs/hookspecs.md too"


def test_every_hook_has_a_row_with_its_events_or_its_refusal() -> None:
    rows = {line.split(" | ")[0].removeprefix("| `").split("(")[0]: line for line in hookspec_doc_tables.hookspecs_table().splitlines()[2:]}
    assert list(rows) == list(HOOK_NAMES)
    for name in NOT_SUPPORTED_YET:
        assert "**fails to load**" in rows[name], rows[name]
    for name, events in EVENTS_OF_HOOK.items():
        assert all(f"`{event}`" in rows[name] for event in events), rows[name]


def test_a_hook_without_a_meaning_fails_naming_it(monkeypatch) -> None:
    monkeypatch.delitem(hookspec_doc_tables.MEANINGS, "admit_message")
    with pytest.raises(hookspec_doc_tables.MissingMeaning, match="admit_message"):
        hookspec_doc_tables.hookspecs_table()


def test_the_docs_link_it() -> None:
    assert "(docs/hookspecs.md)" in (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert "(hookspecs.md)" in (REPO_ROOT / "docs" / "event-hooks.md").read_text(encoding="utf-8")

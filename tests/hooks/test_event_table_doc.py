"""docs/hooks.md and the kernel's one event table must agree, so they cannot drift."""

from __future__ import annotations

import re

from shared.hook_events import HOOK_EVENTS
from shared.settings import REPO_ROOT


def documented_events() -> list[dict[str, str]]:
    text = (REPO_ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    events = []
    for section in sections:
        name, _, body = section.partition("\n")
        fields = dict(re.findall(r"^- (Scope|Runs|Guard|Replace): (.+)$", body, flags=re.MULTILINE))
        events.append({"name": name.strip(), **fields})
    return events


def test_every_event_documented_in_table_order_with_its_semantics() -> None:
    documented = documented_events()
    assert [event["name"] for event in documented] == [event.name for event in HOOK_EVENTS]
    for doc, event in zip(documented, HOOK_EVENTS):
        assert doc["Scope"] == event.scope.value, event.name
        assert doc["Runs"] == event.mode.value, event.name
        assert doc["Guard"] == ("yes" if event.guard else "no"), event.name
        replace = tuple(field.strip() for field in doc["Replace"].split(",")) if doc["Replace"] != "none" else ()
        assert replace == event.replace_fields, event.name


def test_there_are_seventeen_events() -> None:
    assert len(HOOK_EVENTS) == 17

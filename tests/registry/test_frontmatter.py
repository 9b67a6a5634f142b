from __future__ import annotations

import pytest

from services.registry.diagnostics import DiagnosticBag
from services.registry.frontmatter import parse_document


def parse(text: str):
    bag = DiagnosticBag(plugin_id="p")
    return parse_document(text, bag, "PLUGIN.md"), bag.items


def test_plain_yaml_and_stripped_body() -> None:
    document, diagnostics = parse("---\nkind: core\ntags: [a]\n---\n\n  Hello.\n\n")
    assert diagnostics == []
    assert document is not None
    assert document.data == {"kind": "core", "tags": ["a"]}
    assert document.body == "Hello."


def test_crlf_bom_and_empty_frontmatter() -> None:
    document, diagnostics = parse("\ufeff---\r\n---\r\nBody\r\n")
    assert diagnostics == [] and document is not None
    assert document.data == {} and document.body == "Body"


@pytest.mark.parametrize("opening", ["---js", "---javascript", "--- coffee", "---yaml"])
def test_engine_markers_are_rejected_before_parsing(opening: str) -> None:
    document, diagnostics = parse(f"{opening}\nthrow new Error()\n---\n")
    assert document is None
    assert [d.code for d in diagnostics] == ["frontmatter-engine"]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("no frontmatter\n", "frontmatter-missing"),
        ("", "frontmatter-missing"),
        ("---\nkind: core\n", "frontmatter-unclosed"),
        ("---\nkind: [core\n---\n", "frontmatter-yaml"),
        ("---\n- a\n- b\n---\n", "frontmatter-not-mapping"),
        ("---\njust a string\n---\n", "frontmatter-not-mapping"),
    ],
)
def test_broken_frontmatter(text: str, code: str) -> None:
    document, diagnostics = parse(text)
    assert document is None
    assert [d.code for d in diagnostics] == [code]
    assert diagnostics[0].is_error and diagnostics[0].file == "PLUGIN.md"


def test_yaml_dates_become_text() -> None:
    document, _ = parse("---\nreleased: 2024-05-01\n---\n")
    assert document is not None and document.data == {"released": "2024-05-01"}

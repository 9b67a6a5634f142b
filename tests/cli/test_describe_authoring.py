"""`covel describe-authoring` lists every authoring declaration; `--check` validates the examples against their
namespace's schema and fails naming each broken one."""

from __future__ import annotations

import io

from covel_cli.describe_authoring import run
from shared.settings import REPO_ROOT
from tests.registry.conftest import write_plugin

FACTS = """
contributes:
  data:
    facts:
      schema: ./facts.json
      accepts: [example.facts@1]
      authoring:
        title: Facts of the world
        source: {path: data/facts.yaml, kind: list, key: id}
        example: %s
"""
SCHEMA = {"facts.json": '{"type": "object", "required": ["id", "text"], "properties": {"id": {"type": "string"}, "text": {"type": "string"}}}'}


def test_the_builtin_declarations_are_listed_and_pass() -> None:
    out = io.StringIO()
    assert run([REPO_ROOT / "plugins"], True, out) == 0
    text = out.getvalue()
    assert "living-world-rules · rules (accepts living-world-rules@1)" in text and 'source: {"path": "data/rules.yaml"}' in text
    assert "character-blueprint · profiles" in text and "✗" not in text


def test_check_names_each_broken_example(tmp_path) -> None:
    write_plugin(tmp_path, "good-facts", FACTS % '[{id: bells, text: "The bells ring at the ebb."}]', files=SCHEMA)
    write_plugin(tmp_path, "bad-facts", FACTS % "[{id: bells}, {text: 3}]", files=SCHEMA)
    write_plugin(tmp_path, "file-facts", FACTS % "./example.yaml", files={**SCHEMA, "example.yaml": "- {id: tide, text: Low.}\n"})
    out = io.StringIO()
    assert run([tmp_path], False, out) == 0, "without --check nothing is validated"
    out = io.StringIO()
    assert run([tmp_path], True, out) == 1
    text = out.getvalue()
    assert "✗ example[0]: 'text' is a required property" in text and "✗ example[1]/text: 3 is not of type 'string'" in text
    assert text.count("✗") == 3, "good-facts and file-facts pass"

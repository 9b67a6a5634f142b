"""The JSON Schema export of the manifest models."""

from __future__ import annotations

import jsonschema
import yaml

from services.registry.manifest_schema import main, plugin_manifest_schema, runtime_manifest_schema
from shared.settings import default_plugin_dirs
from tests.registry.conftest import FIXTURES


def _frontmatter(path) -> dict:
    text = path.read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---\n")[1])


def test_exported_schemas_are_valid_json_schema() -> None:
    for schema in (plugin_manifest_schema(), runtime_manifest_schema()):
        jsonschema.Draft202012Validator.check_schema(schema)
    properties = plugin_manifest_schema()["properties"]
    assert {"id", "kind", "provides", "requires", "contributes", "runtime", "entry"} <= set(properties)
    assert set(runtime_manifest_schema()["properties"]) == {"type", "schedule", "io", "agent", "function", "guard", "effects", "permissions"}


def test_good_manifests_match_and_unknown_keys_do_not() -> None:
    plugin = jsonschema.Draft202012Validator(plugin_manifest_schema())
    runtime = jsonschema.Draft202012Validator(runtime_manifest_schema())
    assert list(plugin.iter_errors(_frontmatter(default_plugin_dirs()[0] / "narrator" / "PLUGIN.md"))) == []
    assert list(plugin.iter_errors(_frontmatter(FIXTURES / "good" / "journal" / "PLUGIN.md"))) == []
    assert list(runtime.iter_errors(_frontmatter(FIXTURES / "good" / "journal" / "runtimes" / "write" / "RUNTIME.md"))) == []
    broken = _frontmatter(FIXTURES / "unknown-io-key" / "unknown-io-key" / "PLUGIN.md")
    assert any("conceal" in error.message for error in plugin.iter_errors(broken))
    assert list(runtime.iter_errors({"io": {"visibility": "public"}}))


def test_the_module_prints_a_schema(capsys) -> None:
    assert main(["runtime"]) == 0 and '"schedule"' in capsys.readouterr().out
    assert main(["other"]) == 2

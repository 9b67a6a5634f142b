"""The field tables of docs/plugins.md and docs/settings.md are the models', so they cannot drift."""

from __future__ import annotations

import subprocess
import sys

import pytest

from covel_cli import doc_tables, manifest_doc_tables, settings_doc_tables, table_cells
from shared.security import policy
from shared.settings import REPO_ROOT

PLUGINS_DOC = REPO_ROOT / "docs" / "plugins.md"
SETTINGS_DOC = REPO_ROOT / "docs" / "settings.md"
RETRIES_DOC = REPO_ROOT / "docs" / "retries.md"
SECURITY_DOC = REPO_ROOT / "docs" / "security.md"


def blocks_of(path) -> dict[str, str]:
    return doc_tables.blocks_in(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", [PLUGINS_DOC, SETTINGS_DOC, RETRIES_DOC, SECURITY_DOC], ids=lambda path: path.name)
def test_generated_tables_equal_the_docs(path) -> None:
    for key, body in blocks_of(path).items():
        assert body == doc_tables.generated(key), f"{path.name}: table {key} is out of date: run {doc_tables.WRITE_COMMAND}"


def test_retries_md_holds_the_channels_deadlines_and_retries() -> None:
    assert "channel-rules" in blocks_of(RETRIES_DOC), (
        f"docs/retries.md lost `<!-- generated: channel-rules -->`: put it back and run {doc_tables.WRITE_COMMAND}"
    )


def test_security_md_holds_who_may_call_what() -> None:
    """The Service identity section's table is shared/security/policy.py: every rule's callers next to its methods."""
    table = blocks_of(SECURITY_DOC).get("service-policy")
    assert table is not None, f"docs/security.md lost `<!-- generated: service-policy -->`: put it back and run {doc_tables.WRITE_COMMAND}"
    for service, methods in policy.POLICY.items():
        for method, rule in methods.items():
            row = next(line for line in table.splitlines() if line.startswith(f"| `{service.rsplit('.', 1)[1]}` |")
                       and (f"`{method}`" in line or service == policy.CLIENT_API))
            assert ", ".join(f"`{caller}`" for caller in sorted(rule.callers)) in row, (method, row)


def test_every_manifest_model_has_its_table_in_plugins_md() -> None:
    documented = blocks_of(PLUGINS_DOC)
    for name in manifest_doc_tables.manifest_models():
        assert f"manifest-fields:{name}" in documented, (
            f"docs/plugins.md has no table of {name}: add `<!-- generated: manifest-fields:{name} -->` "
            f"and `<!-- end generated -->` where it belongs, then run {doc_tables.WRITE_COMMAND}"
        )


def test_every_manifest_field_appears_as_the_author_writes_it() -> None:
    documented = blocks_of(PLUGINS_DOC)
    for name, (model, _) in manifest_doc_tables.manifest_models().items():
        rows = documented[f"manifest-fields:{name}"]
        for field_name, info in model.model_fields.items():
            assert f"| `{info.alias or field_name}` |" in rows, f"{name}.{info.alias or field_name} is not in docs/plugins.md"


def test_every_settings_model_field_appears_with_its_variable() -> None:
    documented = blocks_of(SETTINGS_DOC)
    for service, model in settings_doc_tables.SETTINGS_MODELS.items():
        rows = documented.get(f"settings:{service}")
        assert rows is not None, f"docs/settings.md has no `<!-- generated: settings:{service} -->` table"
        for field_name, info in settings_doc_tables.settings_fields(service).items():
            variable = f"COVEL_{field_name.upper()}"
            assert f"`{variable}`" in rows, f"{model.__name__}.{field_name} ({variable}) is not in docs/settings.md"
    every_field = {name for model in settings_doc_tables.SETTINGS_MODELS.values() for name in model.model_fields}
    tabled = {name for service in settings_doc_tables.SETTINGS_MODELS for name in settings_doc_tables.settings_fields(service)}
    assert every_field == tabled


def test_environment_names_are_what_pydantic_settings_reads(monkeypatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    model = settings_doc_tables.SETTINGS_MODELS["shared"]
    assert settings_doc_tables.env_names(model, "traces_exporter", model.model_fields["traces_exporter"]) == [
        "COVEL_TRACES_EXPORTER", "OTEL_TRACES_EXPORTER",
    ]
    assert model().traces_exporter == "console"


def test_a_field_without_a_meaning_fails_naming_it(monkeypatch) -> None:
    monkeypatch.delitem(settings_doc_tables.SETTING_MEANINGS, "store_pool_size")
    with pytest.raises(table_cells.MissingMeaning, match="StoreSettings.store_pool_size"):
        doc_tables.generated("settings:store")
    monkeypatch.delitem(manifest_doc_tables.MANIFEST_MEANINGS, "InputBinding.from")
    with pytest.raises(table_cells.MissingMeaning, match="InputBinding.from"):
        doc_tables.generated("manifest-fields:InputBinding")


def test_meanings_name_only_fields_that_exist() -> None:
    manifest_keys = {f"{name}.{info.alias or field}" for name, (model, _) in manifest_doc_tables.manifest_models().items()
                     for field, info in model.model_fields.items()}
    assert set(manifest_doc_tables.MANIFEST_MEANINGS) <= manifest_keys
    assert set(manifest_doc_tables.MANIFEST_DEFAULTS) <= manifest_keys
    settings_keys = {name for model in settings_doc_tables.SETTINGS_MODELS.values() for name in model.model_fields}
    assert set(settings_doc_tables.SETTING_MEANINGS) <= settings_keys


def test_the_module_checks_and_rewrites_a_stale_table(tmp_path, monkeypatch) -> None:
    stale = tmp_path / "settings.md"
    stale.write_text("intro\n<!-- generated: settings:hooks -->\n| old |\n<!-- end generated -->\nend\n", encoding="utf-8")
    monkeypatch.setattr(doc_tables, "DOC_FILES", (stale,))
    monkeypatch.setattr(doc_tables, "REPO_ROOT", tmp_path)
    assert doc_tables.main([]) == 1
    assert doc_tables.main(["--write"]) == 0
    text = stale.read_text(encoding="utf-8")
    assert "`COVEL_HOOKS_FAULT_THRESHOLD`" in text and "| old |" not in text
    assert text.startswith("intro\n") and text.endswith("<!-- end generated -->\nend\n")
    assert doc_tables.main([]) == 0


def test_python_dash_m_runs_in_the_venv() -> None:
    done = subprocess.run([sys.executable, "-m", "covel_cli.doc_tables"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr

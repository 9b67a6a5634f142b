"""The static-check corpus: one broken package per case, each with its exact code, file and field path.

LOAD_BROKEN packages fail at load already; VALIDATION_BROKEN ones load (the part is dropped or
ignored with a warning) and fail only in strict mode, which validate-plugin and install use.
"""

from __future__ import annotations

import pytest

from services.registry.diagnostics import Severity
from services.registry.loaded_package import PackageState
from services.registry.package_loader import load_package
from tests.registry.conftest import FIXTURES

# case folder, plugin id, code, file, field path
LOAD_BROKEN = [
    ('dataset-bad-name', 'dataset-bad-name', 'invalid-dataset-name', 'PLUGIN.md', 'contributes.datasets.9journal'),
    ('dataset-reserved-name', 'dataset-reserved-name', 'reserved-namespace', 'PLUGIN.md', 'contributes.datasets._journal'),
    ('dataset-schema-missing', 'dataset-schema-missing', 'file-missing', 'PLUGIN.md', 'contributes.datasets.journal.schema'),
    ('dataset-schema-bad-json', 'dataset-schema-bad-json', 'invalid-json', 'PLUGIN.md', 'contributes.datasets.journal.schema'),
    ('dataset-schema-outside', 'dataset-schema-outside', 'file-outside-package', 'PLUGIN.md', 'contributes.datasets.journal.schema'),
    ('dataset-schema-not-json', 'dataset-schema-not-json', 'dataset-schema-not-json', 'PLUGIN.md', 'contributes.datasets.journal.schema'),
    ('dataset-schema-not-object', 'dataset-schema-not-object', 'schema-not-object', 'PLUGIN.md', 'contributes.datasets.journal.schema'),
    ('dataset-key-not-required', 'dataset-key-not-required', 'dataset-key-not-required', 'PLUGIN.md', 'contributes.datasets.journal.key'),
    ('dataset-key-unknown', 'dataset-key-unknown', 'dataset-key-unknown', 'PLUGIN.md', 'contributes.datasets.journal.key'),
    ('dataset-ops-empty', 'dataset-ops-empty', 'dataset-ops-empty', 'PLUGIN.md', 'contributes.datasets.journal.ops'),
    ('dataset-ops-duplicate', 'dataset-ops-duplicate', 'dataset-ops-duplicate', 'PLUGIN.md', 'contributes.datasets.journal.ops'),
    ('dataset-unknown-op', 'dataset-unknown-op', 'invalid-value', 'PLUGIN.md', 'contributes.datasets.journal.ops[1]'),
    ('dataset-upsert-without-set', 'dataset-upsert-without-set', 'dataset-tool-without-op', 'PLUGIN.md', 'contributes.datasets.journal.tools'),
    ('dataset-tools-duplicate', 'dataset-tools-duplicate', 'dataset-tools-duplicate', 'PLUGIN.md', 'contributes.datasets.journal.tools'),
    ('dataset-description-long', 'dataset-description-long', 'invalid-value', 'PLUGIN.md', 'contributes.datasets.journal.description'),
    ('dataset-data-schema-differs', 'dataset-data-schema-differs', 'dataset-schema-mismatch', 'PLUGIN.md', 'contributes.datasets.journal.schema'),
    ('agent-unknown-dataset', 'agent-unknown-dataset', 'unknown-dataset', 'PLUGIN.md', 'runtime.agent.tools.datasets[0]'),
    ('agent-dataset-tool-not-provided', 'agent-dataset-tool-not-provided', 'dataset-tool-not-provided', 'PLUGIN.md', 'runtime.agent.tools.datasets[0].tools[0]'),
    ('agent-dataset-twice', 'agent-dataset-twice', 'dataset-listed-twice', 'PLUGIN.md', 'runtime.agent.tools.datasets[1]'),
    ('agent-dataset-tool-too-long', 'agent-dataset-tool-too-long', 'tool-name-too-long', 'PLUGIN.md', 'runtime.agent.tools.datasets[0]'),
    ('agent-dataset-tool-collision', 'agent-dataset-tool-collision', 'tool-name-collision', 'PLUGIN.md', 'runtime.agent.tools.datasets[0]'),
    ('actionkind-not-kebab', 'actionkind-not-kebab', 'invalid-action-kind-name', 'PLUGIN.md', 'contributes.actionKinds[0].name'),
    ('actionkind-base-kind', 'actionkind-base-kind', 'base-action-kind', 'PLUGIN.md', 'contributes.actionKinds[0].name'),
    ('actionkind-duplicate', 'actionkind-duplicate', 'duplicate-action-kind', 'PLUGIN.md', 'contributes.actionKinds[1].name'),
    ('actionkind-schema-missing', 'actionkind-schema-missing', 'file-missing', 'PLUGIN.md', 'contributes.actionKinds[0].schema'),
    ('actionkind-schema-not-object', 'actionkind-schema-not-object', 'schema-not-object', 'PLUGIN.md', 'contributes.actionKinds[0].schema'),
    ('actionkind-roles-empty', 'actionkind-roles-empty', 'invalid-value', 'PLUGIN.md', 'contributes.actionKinds[0].roles'),
    ('actionkind-bad-text', 'actionkind-bad-text', 'invalid-value', 'PLUGIN.md', 'contributes.actionKinds[0].text'),
    ('author-http-link', 'author-http-link', 'insecure-link', 'PLUGIN.md', 'author.links[0].url'),
    ('author-url-credentials', 'author-url-credentials', 'insecure-link', 'PLUGIN.md', 'author.url'),
    ('homepage-javascript', 'homepage-javascript', 'insecure-link', 'PLUGIN.md', 'homepage'),
    ('contract-schema-missing', 'contract-schema-missing', 'file-missing', 'PLUGIN.md', 'contracts.example.facts@1.schema'),
    ('data-schema-bad-json', 'data-schema-bad-json', 'invalid-json', 'PLUGIN.md', 'contributes.data.facts.schema'),
    ('accepts-missing', 'accepts-missing', 'file-missing', 'PLUGIN.md', 'runtime.io.inputs.narrative.accepts'),
    ('output-schema-bad-json', 'output-schema-bad-json', 'invalid-json', 'PLUGIN.md', 'runtime.io.output.schema'),
    ('output-schema-bad-contract', 'output-schema-bad-contract', 'invalid-contract-id', 'PLUGIN.md', 'runtime.io.output.schema'),
    ('accepts-in-runtime-md', 'accepts-in-runtime-md', 'file-outside-package', 'runtimes/extract/RUNTIME.md', 'io.inputs.narrative.accepts'),
    ('ui-spec-missing', 'ui-spec-missing', 'file-missing', 'PLUGIN.md', 'contributes.ui.right'),
    ('ui-spec-shape', 'ui-spec-shape', 'ui-spec-shape', 'PLUGIN.md', 'contributes.ui.message'),
    ('ui-spec-invalid', 'ui-spec-invalid', 'ui-spec-invalid', 'PLUGIN.md', 'contributes.ui.right'),
    ('ui-webview-missing', 'ui-webview-missing', 'ui-spec-invalid', 'PLUGIN.md', 'contributes.ui.right'),
    ('ui-webview-same-origin', 'ui-webview-same-origin', 'ui-spec-invalid', 'PLUGIN.md', 'contributes.ui.right'),
    ('story-requires-plugin-contract', 'story-requires-plugin-contract', 'story-requires-plugin-contract', 'PLUGIN.md', 'requires[0]'),
    ('invalid-conflict', 'invalid-conflict', 'invalid-conflict', 'PLUGIN.md', 'conflicts[0]'),
    ('command-action-undeclared', 'command-action-undeclared', 'command-action-undeclared', 'PLUGIN.md', 'contributes.commands[0].action'),
    ('reserved-tool-name', 'reserved-tool-name', 'reserved-tool-name', 'PLUGIN.md', 'contributes.tools[0]'),
    ('duplicate-tool', 'duplicate-tool', 'duplicate-tool', 'PLUGIN.md', 'contributes.tools[1]'),
    ('duplicate-event-topic', 'duplicate-event-topic', 'duplicate-event-topic', 'PLUGIN.md', 'contributes.events[1]'),
    ('undeclared-tool', 'undeclared-tool', 'undeclared-tool', 'runtimes/extract/RUNTIME.md', 'agent.tools.plugin[0]'),
    ('finish-with-unknown-tool', 'finish-with-unknown-tool', 'finish-with-unknown-tool', 'PLUGIN.md', 'runtime.agent.finishWith'),
    ('effects-bad-parallel-safe', 'effects-bad-parallel-safe', 'invalid-type', 'PLUGIN.md', 'runtime.effects.parallelSafe'),
    ('after-tools-unknown-tool', 'after-tools-unknown-tool', 'after-tools-unknown-tool', 'PLUGIN.md', 'runtime.agent.completion.afterTools[1]'),
    ('select-not-pointer', 'select-not-pointer', 'invalid-json-pointer', 'PLUGIN.md', 'runtime.io.inputs.narrative.select'),
    ('select-bad-escape', 'select-bad-escape', 'invalid-json-pointer', 'PLUGIN.md', 'runtime.io.inputs.narrative.select'),
    ('unknown-kernel-input', 'unknown-kernel-input', 'unknown-kernel-input', 'PLUGIN.md', 'runtime.io.inputs.digest.from.kernel'),
    ('detached-operations-input', 'detached-operations-input', 'detached-operations-input', 'PLUGIN.md', 'runtime.io.inputs.ops.from.kernel'),
    ('background-auto', 'background-auto', 'background-auto', 'PLUGIN.md', 'runtime.schedule.background'),
    ('subagent-guard', 'subagent-guard', 'subagent-field', 'runtimes/actor/RUNTIME.md', 'guard'),
    ('inline-locale-map', 'inline-locale-map', 'inline-locale-map', 'PLUGIN.md', 'displayName'),
    ('locale-bad-yaml', 'locale-bad-yaml', 'locale-yaml', 'locales/zh.yaml', ''),
    ('host-version-unsupported', 'host-version-unsupported', 'host-version-unsupported', 'PLUGIN.md', 'covel'),
    ('invalid-host-range', 'invalid-host-range', 'invalid-host-range', 'PLUGIN.md', 'covel'),
    ('reserved-prompt-id', 'reserved-prompt-id', 'reserved-prompt-id', 'PLUGIN.md', 'contributes.prompt[0].id'),
    ('prompt-bad-position', 'prompt-bad-position', 'invalid-value', 'PLUGIN.md', 'contributes.prompt[0].position'),
    ('reference-within-ambiguous', 'reference-within-ambiguous', 'reference-within-ambiguous', 'PLUGIN.md',
     'contributes.data.events.authoring.references[0].within'),
    ('authoring-without-accepts', 'authoring-without-accepts', 'authoring-without-accepts', 'PLUGIN.md', 'contributes.data.facts.authoring'),
    ('data-unknown-key', 'data-unknown-key', 'unknown-key', 'PLUGIN.md', 'contributes.data.facts.serach'),
    ('service-bad-contract', 'service-bad-contract', 'invalid-contract-id', 'PLUGIN.md', 'contributes.services[0]'),
]

VALIDATION_BROKEN = [
    ('locale-untranslatable', 'locale-untranslatable', 'locale-untranslatable-field', 'locales/zh.yaml', 'PLUGIN.md.version'),
    ('locale-unknown-item', 'locale-unknown-item', 'locale-unknown-item', 'locales/zh.yaml', 'PLUGIN.md.contributes.commands[0]'),
    ('locale-unknown-section', 'locale-unknown-section', 'locale-unknown-section', 'locales/zh.yaml', 'runtimes/gone/RUNTIME.md'),
    ('background-turn-input', 'background-turn-input', 'background-turn-input', 'PLUGIN.md', 'runtime.io.inputs.narrative'),
    ('ui-unknown-location', 'ui-unknown-location', 'unknown-field', 'PLUGIN.md', 'contributes.ui.left'),
]


def _only(package, code: str, file: str, field_path: str):
    matching = [d for d in package.diagnostics if d.code == code and d.field_path == field_path and d.file == file]
    assert len(matching) == 1, [str(d) for d in package.diagnostics]
    return matching[0]


@pytest.mark.parametrize(("case", "plugin_id", "code", "file", "field_path"), LOAD_BROKEN, ids=[row[0] for row in LOAD_BROKEN])
def test_broken_at_load(case: str, plugin_id: str, code: str, file: str, field_path: str) -> None:
    package = load_package(FIXTURES / case / plugin_id, source="community")
    assert package.state is PackageState.FAILED
    diagnostic = _only(package, code, file, field_path)
    assert diagnostic.severity is Severity.ERROR and diagnostic.message and diagnostic.plugin_id == plugin_id
    errors = [d for d in package.diagnostics if d.is_error]
    assert errors == [diagnostic], "each case breaks exactly one rule"


@pytest.mark.parametrize(
    ("case", "plugin_id", "code", "file", "field_path"), VALIDATION_BROKEN, ids=[row[0] for row in VALIDATION_BROKEN]
)
def test_broken_only_in_validation(case: str, plugin_id: str, code: str, file: str, field_path: str) -> None:
    loaded = load_package(FIXTURES / case / plugin_id, source="community")
    assert loaded.state is PackageState.LOADED
    assert _only(loaded, code, file, field_path).severity is Severity.WARNING
    strict = load_package(FIXTURES / case / plugin_id, source="community", strict=True)
    assert strict.state is PackageState.FAILED
    assert _only(strict, code, file, field_path).severity is Severity.ERROR


def test_the_corpus_has_at_least_forty_distinct_cases() -> None:
    from tests.registry.test_package_loader import BROKEN, WARNED

    distinct = {(row[0], row[2], row[4]) for row in [*LOAD_BROKEN, *VALIDATION_BROKEN, *BROKEN, *WARNED]}
    assert len(distinct) >= 40


def test_host_range_that_includes_this_host_loads(tmp_path) -> None:
    from services.registry.host_compatibility import host_version
    from tests.registry.conftest import write_plugin

    root = write_plugin(tmp_path, "ranged", f'covel: ">={host_version()}, <999"')
    assert load_package(root, source="community").state is PackageState.LOADED

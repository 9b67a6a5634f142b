"""Load diagnostics across packages (services/registry/contract_uses.py): a consumed contract no package publishes a
schema for, a provider that only declares, and `accepts: contract:<id>` nobody publishes (optional: a warning, the
package loads; required: the package does not)."""

from __future__ import annotations

from pathlib import Path

from services.registry.catalogue import scan
from services.registry.diagnostics import Severity
from tests.registry.conftest import write_plugin

READER = """
runtime:
  schedule: {stage: post-turn}
  io:
    inputs:
      facts: {from: {contract: %s}, required: false%s}
  function: {}
"""


def found(package, code: str) -> list:
    return [(d.severity, d.field_path) for d in package.diagnostics if d.code == code]


def test_a_consumed_contract_without_a_published_schema_is_reported(tmp_path: Path) -> None:
    write_plugin(tmp_path, "reader", READER % ("facts@1", ""), files={"handler.py": "def handler(ctx):\n    return {}\n"})
    write_plugin(tmp_path, "published", "contracts:\n  lore@1: {schema: ./lore.json}\nprovides: [lore@1]",
                 files={"lore.json": '{"type": "object"}'})
    write_plugin(tmp_path, "lore-reader", READER % ("lore@1", ""), files={"handler.py": "def handler(ctx):\n    return {}\n"})
    packages = {package.id: package for package in scan([tmp_path])}
    assert packages["reader"].loaded
    assert found(packages["reader"], "contract-schema-unpublished") == [(Severity.WARNING, "runtime.io.inputs.facts.from.contract")]
    assert found(packages["lore-reader"], "contract-schema-unpublished") == [], "lore@1 is published"


def test_a_provider_that_only_declares_is_reported(tmp_path: Path) -> None:
    write_plugin(tmp_path, "empty-provider", "provides: [lore@1, tips@1]\ncontributes:\n  services: [tips@1]")
    [package] = scan([tmp_path])
    assert package.loaded and found(package, "provides-not-produced") == [(Severity.WARNING, "provides[0]")], "tips@1 is a service"


def test_accepts_of_a_contract_nobody_publishes(tmp_path: Path) -> None:
    write_plugin(tmp_path, "optional", READER % ("facts@1", ", accepts: 'contract:facts@1'"), files={"handler.py": "def handler(ctx):\n    return {}\n"})
    required = READER.replace("required: false", "required: true") % ("facts@1", ", accepts: 'contract:facts@1'")
    write_plugin(tmp_path, "required", required, files={"handler.py": "def handler(ctx):\n    return {}\n"})
    packages = {package.id: package for package in scan([tmp_path])}
    assert packages["optional"].loaded
    assert found(packages["optional"], "accepts-contract-unresolved") == [(Severity.WARNING, "runtime.io.inputs.facts.accepts")]
    assert not packages["required"].loaded and packages["required"].runtimes == []
    assert found(packages["required"], "accepts-contract-unresolved") == [(Severity.ERROR, "runtime.io.inputs.facts.accepts")]

"""The framework's character-actor@1 schema: a provider that names the contract and writes no schema is checked
against it (and the model is given it as the response format); `schema: contract:character-actor@1` reads the same."""

from __future__ import annotations

from pathlib import Path

from services.scheduler.execution.output_contracts import check_output, output_schemas
from tests.scheduler.agent_harness import runtime

ACTOR = {"schedule": {"subagentOnly": True}, "io": {"output": {"contract": "character-actor@1"}}}


def test_a_provider_without_a_schema_is_checked_against_the_frameworks() -> None:
    for manifest in (ACTOR, {**ACTOR, "io": {"output": {"contract": "character-actor@1", "schema": "contract:character-actor@1"}}}):
        schemas = output_schemas(runtime(manifest=manifest).manifest, {}, Path("."))
        assert [label for label, _ in schemas] in (["contract character-actor@1"], ["contract:character-actor@1"])
        assert check_output({"segments": [{"kind": "dialogue", "text": "Welcome, traveller."}], "intent": "be kind"}, schemas) is None
        refused = check_output({"segments": [{"kind": "dialogue", "text": "Hi.", "speaker": "Mara"}]}, schemas)
        assert refused is not None and "speaker" in refused, "the orchestrator adds the speaker"
        assert check_output({"segments": []}, schemas) is not None

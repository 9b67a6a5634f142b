"""A slot's own base_url / api_key_env / api_key_file override its provider's, field by field."""

from __future__ import annotations

import textwrap

from services.gateway.settings import GatewaySettings
from services.gateway.slots import SlotTable


def test_slot_fields_override_only_the_provider_fields_they_set(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("COVEL_TEST_SLOT_KEY", "sk-slot")
    config = tmp_path / "gateway.yaml"
    config.write_text(
        textwrap.dedent(
            """
            providers:
              cloud: {base_url: https://llm.example.com/v1, api_key_env: COVEL_TEST_PROVIDER_KEY}
            slots:
              story: {provider: cloud, model: big, base_url: https://eu.example.com/v1}
              memory: {provider: cloud, model: small, api_key_env: COVEL_TEST_SLOT_KEY}
              fast: cloud:tiny
            """
        )
    )
    table = SlotTable.from_settings(GatewaySettings(gateway_config=config))
    story, memory, fast = (table.resolve(slot).chain[0].provider for slot in ("story", "memory", "fast"))
    assert (story.base_url, story.api_key_env) == ("https://eu.example.com/v1", "COVEL_TEST_PROVIDER_KEY")
    assert (memory.base_url, memory.api_key_env, memory.api_key()) == ("https://llm.example.com/v1", "COVEL_TEST_SLOT_KEY", "sk-slot")
    assert fast is table.providers["cloud"]

"""A slot's own base_url / api_key_env / api_key_file override its provider's, field by field."""

from __future__ import annotations

import textwrap

import pytest

from services.gateway.settings import GatewaySettings
from services.gateway.slots import SlotConfigError, SlotTable


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


def test_a_slot_names_its_models_context_window_and_a_bad_one_is_refused(tmp_path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("slots:\n  story: {provider: scripted, context_window: 32000, fallbacks: ['scripted:other']}\n  fast: scripted\n")
    table = SlotTable.from_settings(GatewaySettings(gateway_config=config))
    primary, fallback = table.resolve("story").chain
    assert (primary.context_window, fallback.context_window) == (32000, 0), "a fallback model's window is not the slot's"
    assert table.resolve("fast").chain[0].context_window == 0
    for bad in ("'big'", "-1", "true", "1.5"):
        config.write_text(f"slots:\n  story: {{provider: scripted, context_window: {bad}}}\n")
        with pytest.raises(SlotConfigError, match=r"slots.story.context_window must be a whole number"):
            SlotTable.from_settings(GatewaySettings(gateway_config=config))

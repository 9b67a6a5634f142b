"""Locale variants of prompts: a Simplified Chinese session reads PLUGIN.zh.md / RUNTIME.zh.md (the
runtime's body and the fixed contributes.prompt segments); every other language reads the main file."""

from __future__ import annotations

import pytest

from services.registry.package_loader import load_package
from services.registry.proto_mapping import package_to_proto
from services.scheduler.agent.context import (
    assemble,
    configure_instruction_locale,
    prompt_file,
    runtime_prompt,
    static_segments,
    variant_locale,
)
from services.scheduler.catalogue import Package
from services.scheduler.settings import SchedulerSettings
from shared.settings import default_plugin_dirs
from tests.scheduler.agent_harness import runtime
from tests.scheduler.compiled import compiled_package

WORLD_EN = "The harbor town of Saltmere."
WORLD_ZH = "港口小镇盐沼镇。"


def world_package(plugin_id: str = "world", translated: bool = True) -> Package:
    contributes = {"prompt": [
        {"id": "world", "position": "system", "content": WORLD_EN},
        {"id": "rules", "position": "post-history", "role": "user", "content": "Keep it short."},
    ]}
    # The zh variant translates the world segment (PLUGIN.zh.md frontmatter, by id).
    variant = f'---\n{{"contributes": {{"prompt": [{{"id": "world", "content": "{WORLD_ZH}"}}]}}}}\n---\n'
    return compiled_package(plugin_id, package={"contributes": contributes}, files={"PLUGIN.zh.md": variant} if translated else None)


@pytest.mark.parametrize(("locale", "variant"), [
    ("zh", "zh"), ("zh-CN", "zh"), ("zh-Hans", "zh"), ("zh_SG", "zh"),
    ("zh-TW", ""), ("zh-Hant", ""), ("zh-HK", ""), ("en", ""), ("ja", ""), ("", ""),
])
def test_only_simplified_chinese_reads_the_variant(locale: str, variant: str) -> None:
    assert variant_locale(locale) == variant


def test_a_zh_session_reads_the_translated_segment_and_the_english_where_there_is_none() -> None:
    narrator = runtime("narrator", "story")
    zh = static_segments(narrator, True, [world_package()], "zh")
    assert [(s["id"], s["content"], s["position"], s["pluginId"]) for s in zh] == [
        ("world", WORLD_ZH, "system", "world"), ("rules", "Keep it short.", "post-history", "world")]
    for locale in ("en", "zh-TW", ""):
        assert [s["content"] for s in static_segments(narrator, True, [world_package()], locale)] == [WORLD_EN, "Keep it short."]
    # A package without translations reads English in every session.
    assert static_segments(narrator, True, [world_package(translated=False)], "zh")[0]["content"] == WORLD_EN


def test_a_system_runtime_reads_its_own_packages_segments_in_the_sessions_language() -> None:
    helper = runtime("world/helper")
    assert [s["content"] for s in static_segments(helper, False, [world_package(), world_package("other")], "zh")] == [
        WORLD_ZH, "Keep it short."]


def test_the_assembled_prompt_carries_the_sessions_language() -> None:
    narrator = runtime("narrator", "story", prompt="Tell the story.")
    narrator.prompt_variants["zh"] = "讲故事。"
    for locale, body, world in (("zh", "讲故事。", WORLD_ZH), ("en", "Tell the story.", WORLD_EN), ("zh-TW", "Tell the story.", WORLD_EN)):
        segments = static_segments(narrator, True, [world_package()], locale)
        system, messages = assemble(narrator, locale, True, [], "Hello", 5, segments=segments)
        assert body in system and world in system
        assert (WORLD_EN if world == WORLD_ZH else WORLD_ZH) not in system
        assert messages[-2:] == [{"role": "user", "content": "Keep it short."}, {"role": "user", "content": "Hello"}]
        assert runtime_prompt(narrator, locale) == body


def test_the_bootstrap_record_names_the_file_the_prompt_came_from() -> None:
    agent = runtime("notes/extract", prompt="Extract.")
    assert prompt_file(agent, "zh", "/pkg")["name"] == "RUNTIME.md"  # no zh variant: the main file
    agent.prompt_variants["zh"] = "提取。"
    assert prompt_file(agent, "zh", "/pkg") == {"name": "RUNTIME.zh.md", "path": "/pkg/runtimes/extract/RUNTIME.zh.md",
                                                "missing": False, "content": "提取。"}
    assert prompt_file(agent, "zh-TW", "/pkg")["name"] == "RUNTIME.md"


def test_demo_worlds_chinese_world_text_reaches_a_zh_session() -> None:
    """The builtin demo-world as the registry compiles it and sends it (proto), read by the narrator."""
    package = Package.from_proto(package_to_proto(load_package(default_plugin_dirs()[0] / "demo-world", source="builtin")))
    narrator = runtime("narrator", "story")
    [zh] = static_segments(narrator, True, [package], "zh")
    [en] = static_segments(narrator, True, [package], "en")
    assert zh["id"] == en["id"] == "world" and zh["position"] == en["position"] == "system"
    assert zh["content"].startswith("世界：盐沼镇") and "米拉，港务长" in zh["content"]
    assert en["content"].startswith("World: Saltmere")


@pytest.fixture
def instruction_locale():
    """Sets COVEL_INSTRUCTION_LOCALE's effect for one test, then follows sessions again."""
    yield configure_instruction_locale
    configure_instruction_locale("")


def test_a_fixed_instruction_locale_decides_the_variant_but_not_the_content_language(instruction_locale, monkeypatch) -> None:
    monkeypatch.setenv("COVEL_INSTRUCTION_LOCALE", "en")
    assert SchedulerSettings().instruction_locale == "en"
    narrator = runtime("narrator", "story", prompt="Tell the story.")
    narrator.prompt_variants["zh"] = "讲故事。"
    instruction_locale("en")
    system, _ = assemble(narrator, "zh", True, [], "你好", 5, segments=static_segments(narrator, True, [world_package()], "zh"))
    # English instructions and world text, but the player still reads Simplified Chinese.
    assert "Tell the story." in system and WORLD_EN in system and "讲故事。" not in system
    assert "Write everything the player reads in Simplified Chinese." in system
    instruction_locale("zh")
    assert runtime_prompt(narrator, "en") == "讲故事。" and variant_locale("ja") == "zh"
    system, _ = assemble(narrator, "en", True, [], "Hello", 5, segments=static_segments(narrator, True, [world_package()], "en"))
    assert WORLD_ZH in system and "Write everything the player reads in English." in system


def test_the_instruction_locale_setting_takes_only_en_zh_or_nothing(monkeypatch) -> None:
    monkeypatch.setenv("COVEL_INSTRUCTION_LOCALE", "fr")
    with pytest.raises(ValueError, match="instruction_locale"):
        SchedulerSettings()

"""Texts in the session's language from plugin code (the spec's translate / labelText / instructionLocaleFor).

    translate(ctx, "Nothing to report.")      # its translation in locales/<locale>.yaml `messages`, else the English
    label_text(ctx, {"en": "Bell", "zh": "钟"})  # a label written as a locale map, or a plain English label
    instruction_locale_for(ctx.locale)          # "zh" or "en": the language of prompt text a plugin adds

`translate` reads ctx.messages: a function handler's or guard's ctx has the plugin's messages in the session's locale;
elsewhere (a tool, a hook) there are none and the English text comes back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

TRADITIONAL_CHINESE = ("zh-hant", "zh-tw", "zh-hk", "zh-mo")


def instruction_locale_for(locale: str, fixed: str | None = None) -> str:
    """`zh` for Simplified Chinese, `en` for every other language (Traditional Chinese included); COVEL_INSTRUCTION_LOCALE
    (or `fixed`) decides for every session when set. The kernel picks prompt variants (PLUGIN.zh.md) by the same rule."""
    chosen = os.environ.get("COVEL_INSTRUCTION_LOCALE", "") if fixed is None else fixed
    tag = (chosen or locale or "").lower().replace("_", "-")
    if tag != "zh" and not tag.startswith("zh-"):
        return "en"
    return "en" if tag.startswith(TRADITIONAL_CHINESE) else "zh"


def _locale(ctx: Any) -> str:
    execution = getattr(ctx, "execution", None)
    found = getattr(ctx, "locale", None) or (execution.get("locale") if isinstance(execution, Mapping) else None)
    return str(found or "en")


def translate(ctx: Any, text: str) -> str:
    """`text` (the English original) in the session's language, from the plugin's `messages`; else `text` itself."""
    messages = getattr(ctx, "messages", None)
    found = messages.get(text) if isinstance(messages, Mapping) else None
    return found if isinstance(found, str) and found else text


def label_text(ctx: Any, label: Any) -> str:
    """A label as the player reads it: a locale map ({en, zh, ...}) in the session's locale (its base language, then
    English, then any), a plain label translated like `translate`."""
    if isinstance(label, Mapping):
        locale = _locale(ctx)
        for key in (locale, locale.split("-")[0], "en"):
            if isinstance(label.get(key), str):
                return str(label[key])
        return next((str(value) for value in label.values() if isinstance(value, str)), "")
    return translate(ctx, str(label)) if label is not None else ""

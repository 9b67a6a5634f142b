"""chat-mode-narrator: its settings (the narrative person, speakers per turn), added to its own runtimes' system prompts.

The kernel has no prompt templating, so the settings reach the prompts through the hook meant for it
(PostContextAssembly), for this plugin's runtimes only (plan and narrate)."""

PLUGIN_ID = "chat-mode-narrator"
DEFAULT_PERSON = "second"
DEFAULT_MAX_SPEAKERS = 3
PERSON_RULES = {
    "en": {
        "second": "Narrative person: second. Address the player's character as \"you\".",
        "third": ("Narrative person: third. Refer to the player's character by name or as he, she or they; "
                  "never address them as \"you\"."),
    },
    "zh": {
        "second": "叙事人称：第二人称。用“你”称呼玩家的角色。",
        "third": "叙事人称：第三人称。用名字或“他”“她”称呼玩家的角色，不要用“你”。",
    },
}
SPEAKERS_RULE = {
    "en": "At most {n} characters besides the player's speak this turn.",
    "zh": "这一回合除玩家的角色外，最多 {n} 个角色开口。",
}


def register(covel):
    covel.on("PostContextAssembly", add_settings_rules, match={"ctx.plugin_id": PLUGIN_ID}, timeout_ms=1000)


def _language(locale: str) -> str:
    return "zh" if str(locale or "").startswith("zh") else "en"


def settings_rules(locale: str, settings: dict) -> str:
    """The rules the settings add to the prompt; a value outside the declared ones fails the hook with the reason
    (the hook trace shows it) instead of telling the story in a way nobody chose."""
    language = _language(locale)
    person = settings.get("person", DEFAULT_PERSON)
    rules = PERSON_RULES[language]
    if person not in rules:
        raise ValueError(f"chat-mode-narrator: the setting person must be one of {', '.join(rules)}, not {person!r}")
    speakers = settings.get("maxSpeakers", DEFAULT_MAX_SPEAKERS)
    if isinstance(speakers, float) and speakers.is_integer():
        speakers = int(speakers)
    if not isinstance(speakers, int) or isinstance(speakers, bool) or not 1 <= speakers <= 6:
        raise ValueError(f"chat-mode-narrator: the setting maxSpeakers must be an integer from 1 to 6, not {speakers!r}")
    return f"{rules[person]}\n{SPEAKERS_RULE[language].format(n=speakers)}"


def add_settings_rules(ctx, payload):
    if ctx.plugin_id != PLUGIN_ID:
        return None
    rules = settings_rules(ctx.locale, ctx.get_own_settings() or {})
    return {"action": "continue", "replace": {"systemPrompt": f"{payload['systemPrompt']}\n\n{rules}"}}

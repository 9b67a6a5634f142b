"""Narrator: the narrative-person setting, added to the narrator's own system prompt.

The kernel has no prompt templating yet, so the setting reaches the prompt through the one
hook meant for it (PostContextAssembly), only for this plugin's runtime.
"""

DEFAULT_PERSON = "second"
PERSON_RULES = {
    "en": {
        "second": "Narrative person: second. Address the player's character as \"you\".",
        "third": (
            "Narrative person: third. Refer to the player's character by name or as he, she or they; "
            "never address them as \"you\"."
        ),
    },
    "zh": {
        "second": "叙事人称：第二人称。用“你”称呼玩家的角色。",
        "third": "叙事人称：第三人称。用名字或“他”“她”称呼玩家的角色，不要用“你”。",
    },
}


def register(covel):
    # Only this plugin's own runtime's prompt; the kernel tests the match before sending the event.
    covel.on("PostContextAssembly", add_person_rule, match={"ctx.plugin_id": "narrator"}, timeout_ms=1000)


def person_rule(locale: str, person: str) -> str:
    """The rule for the setting; a value that is not second or third fails the hook with the reason
    (the hook trace shows it) instead of telling the story in a person nobody chose."""
    rules = PERSON_RULES["zh" if locale.startswith("zh") else "en"]
    if person not in rules:
        raise ValueError(f"narrator: the setting person must be one of {', '.join(rules)}, not {person!r}")
    return rules[person]


def add_person_rule(ctx, payload):
    if ctx.plugin_id != "narrator":
        return None
    person = (ctx.get_own_settings() or {}).get("person", DEFAULT_PERSON)
    return {"action": "continue", "replace": {"systemPrompt": f"{payload['systemPrompt']}\n\n{person_rule(ctx.locale, person)}"}}

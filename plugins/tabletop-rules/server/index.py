"""tabletop-rules' entry: the point-buy form's validator, and the prompt segment that tells the story this turn's checks.

The segment reaches every story engine (narrator, chat-mode-narrator, ...): a story runtime reads every active
provider's segments, with this plugin's data as the story's execution sees it (the check runtime's write of
this turn included)."""

from ..lib import rules

OUTCOMES = {
    "en": {"critical-success": "a critical success", "success": "a success", "failure": "a failure", "critical-failure": "a critical failure"},
    "zh": {"critical-success": "大成功", "success": "成功", "failure": "失败", "critical-failure": "大失败"},
}
HEADINGS = {
    "en": "Attribute checks of this turn, already resolved by the rules (tell each outcome as it fell; do not mention numbers or dice):",
    "zh": "本回合的属性检定，规则已经结算（按结果讲述，不要提数字或骰子）：",
}


def register(covel):
    covel.register_form_validator(rules.FORM_ID, check_point_buy)
    covel.provide_extension("prompt.segment@1", "checks", checks_segment)


def check_point_buy(ctx, values):
    """Refuse an answer that is not a valid sheet ({field: why}; "" for the whole answer)."""
    settings = ctx.get_own_settings() or {}
    attributes, (low, high) = rules.attributes_of(settings), rules.bounds_of(settings)
    problems = rules.sheet_problems(dict(values or {}), attributes, low, high, int(settings.get("budget", rules.DEFAULT_BUDGET)))
    return problems or None


def _language(ctx) -> str:
    return "zh" if str(getattr(ctx, "locale", "en") or "en").startswith("zh") else "en"


def checks_segment(ctx, request: dict | None = None):
    latest = (((request or {}).get("data") or {}).get("turn") or {}).get("latest") or {}
    checks = [check for check in latest.get("checks") or [] if isinstance(check, dict)]
    if not checks:
        return None
    language = _language(ctx)
    names = rules.NAMES[language]
    lines = [HEADINGS[language]]
    for check in checks:
        attribute = names.get(check.get("attribute"), check.get("attribute"))
        outcome = OUTCOMES[language].get(check.get("outcome"), check.get("outcome"))
        lines.append(f"- {check.get('action')} ({attribute}, {check.get('difficulty')}): {outcome}")
    return {"id": "checks", "content": "\n".join(lines), "position": "system"}

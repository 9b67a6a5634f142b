"""branch-reply: the offer-variants tool, the choose-variant action and the history transform.

- offer-variants (the inline agent's finishing tool) keeps the versions it wrote as
  variants/<turn number> {turnId, texts} and shows them under the story (a UI block).
- choose-variant (the /variant command) records the player's pick as choices/<turn number>
  {variant}; 1 is the reply as told.
- prompt.history-transform@1/chosen-variant puts the picked version in place of the story's
  reply in the history the next turns' prompts read. The stored log keeps the reply as told.
"""

from shared.plugin_sdk import ToolError

from ..lib.variants import VariantError, check_variants, chosen_texts, follow_choices, offer_block, parse_choice

DEFAULT_COUNT = 2


def register(covel):
    covel.register_tool(
        "offer-variants", offer_variants,
        description="Keep the other versions you wrote of the latest story reply and show them to the player. "
                    "Give exactly as many versions as the plugin's setting asks (2 unless told otherwise).",
        parameters={"type": "object", "required": ["variants"], "additionalProperties": False,
                    "properties": {"variants": {"type": "array", "minItems": 1, "maxItems": 4, "items": {
                        "type": "object", "required": ["text"], "additionalProperties": False,
                        "properties": {"text": {"type": "string", "minLength": 1}}}}}})
    covel.register_rpc("choose-variant", choose_variant,
                       description="Switch a turn's story reply to another version: {variant, turn?} (1: as told).")
    covel.provide_extension("prompt.history-transform@1", "chosen-variant", chosen_variant)


def _count(ctx) -> int:
    count = ctx.get_own_settings().get("count", DEFAULT_COUNT)
    return count if isinstance(count, int) and not isinstance(count, bool) and 1 <= count <= 4 else DEFAULT_COUNT


def offer_variants(ctx, args):
    try:
        texts = check_variants(args, _count(ctx))
    except VariantError as error:
        raise ToolError(error.code, error.message, error.hint) from None
    ctx.set_plugin_data("variants", str(ctx.turn_number), {"turnId": ctx.turn_id, "texts": texts})
    return {"turn": ctx.turn_number, "variants": [{"number": n, "text": t} for n, t in enumerate(texts, start=2)],
            "ui": [offer_block(texts, ctx.locale)]}


def choose_variant(ctx, payload):
    try:
        turn, variant = parse_choice(payload, ctx.turn_number, _count(ctx))
    except VariantError as error:
        raise ToolError(error.code, error.message, error.hint) from None
    ctx.set_plugin_data("choices", str(turn), {"variant": variant})
    return {"turn": turn, "variant": variant}


def chosen_variant(ctx, request):
    """The history with the picked versions in place of the replies as told (None: unchanged)."""
    request = request if isinstance(request, dict) else {}
    messages = request.get("messages")
    if not isinstance(messages, list):
        raise ValueError("prompt.history-transform@1: the request has no messages list")
    changed = follow_choices(messages, chosen_texts(request.get("data") or {}))
    return None if changed is None else {"messages": changed}

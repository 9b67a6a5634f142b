"""living-world-rules' prompt.segment@1 provider: the world's rules, in every story prompt, read-only."""

from ..lib.segment import segment_text


def register(covel):
    covel.provide_extension("prompt.segment@1", "rules", rules_segment)


def rules_segment(ctx, request: dict | None = None):
    """{id, content, position} of the segment, or None when the world declares no rules.

    `request` is the kernel's prompt.segment@1 request; its `data` holds this plugin's records (`rules`,
    `info`), imported from the world package."""
    text = segment_text((request or {}).get("data"), str(getattr(ctx, "locale", "en")))
    if not text:
        return None
    return {"id": "rules", "content": text, "position": "system"}

"""scene-stage's prompt.segment@1 provider: the committed stage (scene, time of day, lighting, who is
on stage and how) for story runtimes, so the story keeps the place and the people consistent. A pure
function of the `stage` record the kernel hands it (the seed's, on the first turn); it never writes."""

from ..lib.stage import stage_text


def register(covel):
    covel.provide_extension("prompt.segment@1", "stage", stage_segment)


def stage_segment(ctx, request: dict | None = None):
    request = request or {}
    if request.get("visibility") not in (None, "story"):
        return None
    stage = ((request.get("data") or {}).get("stage") or {}).get("current")
    text = stage_text(stage, str(request.get("locale") or getattr(ctx, "locale", "en")))
    return {"id": "stage", "content": text, "position": "system"} if text else None

"""character-blueprint's prompt.segment@1 provider: the preset profiles of the characters present
(the `present` records the presence runtime keeps) and of those the player's words name, for story
runtimes. A pure function of the records the kernel hands it; it never writes."""

from ..lib.profiles import profiles_segment


def register(covel):
    covel.provide_extension("prompt.segment@1", "profiles", profiles)


def profiles(ctx, request: dict | None = None):
    request = request or {}
    if request.get("visibility") not in (None, "story"):
        return None
    settings = ctx.get_own_settings() if hasattr(ctx, "get_own_settings") else {}
    return profiles_segment(request.get("data") or {}, str(request.get("playerMessage") or ""),
                            str(request.get("locale") or getattr(ctx, "locale", "en")), int((settings or {}).get("maxProfiles", 6)))

"""The story's scene and presence cues: cues.scene, cues.mood, cues.present and the speakers."""

from ...lib.context import value
from ...lib.stage import story_cues


async def handler(ctx):
    return story_cues(value(ctx, "story"))

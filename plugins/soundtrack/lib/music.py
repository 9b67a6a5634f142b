"""soundtrack's pure rules: which track fits a scene, a mood or an override, and how a change is shown."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_WORD = re.compile(r"[\w'-]+", re.UNICODE)


def norm(text: Any) -> str:
    return " ".join(str(text or "").split()).casefold()


def words(text: Any) -> set[str]:
    return {w.strip("'-") for w in _WORD.findall(norm(text))} - {""}


def ordered(tracks: Mapping[str, Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The world's tracks in a stable order (by id)."""
    return [tracks[key] for key in sorted(tracks)]


def scene_of(stage: Mapping[str, Any] | None, cues: Mapping[str, Any] | None) -> tuple[str, set[str]]:
    """(the scene's key, its tags): scene-stage's committed scene when there is one, else the story's scene cue."""
    scene = (stage or {}).get("scene") if isinstance(stage, Mapping) else None
    if isinstance(scene, Mapping) and (scene.get("id") or scene.get("name")):
        tags = {norm(t) for t in scene.get("tags") or ()}
        for field in ("id", "kind"):
            if scene.get(field):
                tags.add(norm(scene[field]))
        for field in ("name", "location"):
            tags |= words(scene.get(field))
        return norm(scene.get("id") or scene.get("name")), tags
    text = (cues or {}).get("scene") if isinstance(cues, Mapping) else None
    if text:
        return norm(text), words(text) | {norm(text)}
    return "", set()


def tag_score(track: Mapping[str, Any], field: str, tags: set[str]) -> int:
    """How many of the track's `field` tags the wanted tags hold (a tag of several words: all its words)."""
    score = 0
    for tag in track.get(field) or ():
        tag = norm(tag)
        if tag in tags or (" " in tag and words(tag) <= tags):
            score += 1
    return score


def best(tracks: Iterable[Mapping[str, Any]], scene_tags: set[str] = frozenset(), mood: str = "") -> Mapping[str, Any] | None:
    """The track that fits: with a mood, the mood's tracks, those of the scene first; else the scene's best."""
    tracks = list(tracks)
    if mood:
        fitting = [t for t in tracks if norm(mood) in {norm(m) for m in t.get("moods") or ()}]
        if not fitting:
            return None
        return max(fitting, key=lambda t: tag_score(t, "scenes", scene_tags))
    scored = [(tag_score(t, "scenes", scene_tags), t) for t in tracks]
    top = max((score for score, _ in scored), default=0)
    return next((t for score, t in scored if score == top), None) if top > 0 else None


def default_track(tracks: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((t for t in tracks if t.get("default")), None)


def playable(track: Mapping[str, Any]) -> dict[str, Any]:
    """The track as clients play it: {id, title, src, source: world | url, loop, volume?, credit?}."""
    if track.get("url"):
        src, source = str(track["url"]), "url"
    elif track.get("file"):
        src, source = str(track["file"]), "world"
    else:
        raise ValueError(f"track {track.get('id')!r} has neither a file nor a url")
    found = {"id": str(track["id"]), "title": str(track.get("title") or track["id"]), "src": src, "source": source,
             "loop": bool(track.get("loop", True))}
    if isinstance(track.get("volume"), (int, float)):
        found["volume"] = float(track["volume"])
    if track.get("credit"):
        found["credit"] = str(track["credit"])
    return found


def override_track(tracks: list[Mapping[str, Any]], overrides: Iterable[Any], scene_tags: set[str]) -> tuple[Mapping[str, Any] | None, str]:
    """The last override that names a playable track: (track, reason); (None, "") when none does."""
    chosen, reason = None, ""
    for item in overrides:
        if not isinstance(item, Mapping):
            continue
        track = None
        if item.get("track"):
            track = next((t for t in tracks if t.get("id") == item["track"]), None)
        elif item.get("tags"):
            track = best(tracks, {norm(t) for t in item["tags"]} | scene_tags)
        elif item.get("mood"):
            track = best(tracks, scene_tags, str(item["mood"]))
        if track is not None:
            chosen, reason = track, str(item.get("reason") or "")[:300]
    return chosen, reason


WHY_TEXT = {
    "en": {"scene": "the scene", "mood": "the mood", "override": "the story", "default": "the world's theme"},
    "zh": {"scene": "场景", "mood": "氛围", "override": "剧情", "default": "世界主题"},
}


def announce(playing: Mapping[str, Any], locale: str) -> dict[str, list[dict[str, Any]]]:
    """The effects of a change: a notification and a UI block with the track and why it plays."""
    zh = str(locale or "").startswith("zh")
    track = playing["track"]
    why = WHY_TEXT["zh" if zh else "en"][playing["why"]]
    title = "配乐" if zh else "Music"
    text = (f"正在播放：{track['title']}" if zh else f"Now playing: {track['title']}")
    parts: list[dict[str, Any]] = [{"type": "text", "text": f"♪ {track['title']}"},
                                   {"type": "kv", "label": "原因" if zh else "because of", "value": playing.get("reason") or why}]
    return {"notifications": [{"level": "info", "title": title, "text": text}],
            "ui": [{"id": "soundtrack-now-playing", "slot": "message", "title": title, "parts": parts}]}

"""scene-stage's pure rules: the world's scenes and characters by name, the stage a world starts with,
directions from the story's cues, how the turn's directions merge into the committed stage, the cast
other plugins read, and the stage as prompt text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from shared.plugin_sdk.package_files import media_ref

_ARTICLE = re.compile(r"^(the|a|an)\s+", re.IGNORECASE)
SCENE_FIELDS = ("id", "name", "location", "kind", "timeOfDay", "lighting")
PERFORMANCE = ("pose", "expression", "position")


def norm(text: Any) -> str:
    return " ".join(str(text or "").split()).casefold()


def bare(text: Any) -> str:
    """A place's name without its article: "The Drowned Lantern" -> "drowned lantern"."""
    return _ARTICLE.sub("", norm(text))


def find_character(name: str, characters: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The world character a name means: the whole id, name or an alias (any case), only when one matches."""
    wanted = norm(name)
    characters = list(characters)
    if not wanted:
        return None
    for field in ("id", "name"):
        hits = [c for c in characters if norm(c.get(field)) == wanted]
        if len(hits) == 1:
            return hits[0]
    hits = [c for c in characters if wanted in (norm(a) for a in c.get("aliases") or ())]
    return hits[0] if len(hits) == 1 else None


def find_scene(name: Any, scenes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The world's scene a name means: its id, name or an alias, with or without an article, or a cue that
    holds its whole name ("The Drowned Lantern inn on the harbor" is the scene "The Drowned Lantern")."""
    wanted = bare(name)
    if not wanted:
        return None
    scenes = list(scenes)
    for scene in scenes:
        names = [scene.get("id"), scene.get("name"), *(scene.get("aliases") or ())]
        if wanted in {bare(n) for n in names if n}:
            return scene
    hits = [s for s in scenes if any(len(bare(n)) >= 4 and re.search(rf"(?<!\w){re.escape(bare(n))}(?!\w)", wanted)
                                     for n in [s.get("name"), *(s.get("aliases") or ())] if n)]
    return hits[0] if len(hits) == 1 else None


def scene_from_world(scene: Mapping[str, Any]) -> dict[str, Any]:
    found = {field: str(scene[field]) for field in SCENE_FIELDS if scene.get(field)}
    backdrop = media_ref(scene.get("backdrop"))
    if backdrop:
        found["backdrop"] = backdrop
    if scene.get("tags"):
        found["tags"] = [str(t) for t in scene["tags"]]
    return found


def actor(name: str, characters, turn: int, earlier: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """An actor for a name: the world character it means (never a player's), else the name as written."""
    character = find_character(name, characters)
    if character is not None and character.get("type") == "player":
        return None
    found = dict(earlier or {})
    if character is not None:
        found.update({"id": str(character["id"]), "name": str(character.get("name") or character["id"])[:120]})
    else:
        found["name"] = " ".join(str(name).split())[:120]
    found.setdefault("since", turn)
    return found


def same_actor(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if a.get("id") and b.get("id"):
        return a["id"] == b["id"]
    return norm(a.get("name")) == norm(b.get("name"))


def seed_stage(scenes: Mapping[str, Mapping[str, Any]], characters, turn: int, world_id: str | None) -> dict[str, Any] | None:
    """The stage a world starts with: its `start` scene (else the first by id) and that scene's cast."""
    if not scenes:
        return None
    ordered = [scenes[k] for k in sorted(scenes)]
    first = next((s for s in ordered if s.get("start")), ordered[0])
    actors = []
    for character_id in first.get("cast") or ():
        found = actor(character_id, characters, turn)
        if found is not None and not any(same_actor(found, a) for a in actors):
            actors.append(found)
    return {"scene": scene_from_world(first), "actors": actors, "since": turn, "turn": turn, "worldId": world_id,
            "changed": ["scene", "cast"], "entered": [a["name"] for a in actors], "left": [], "reason": "the world's opening scene"}


def story_cues(story: Mapping[str, Any] | None) -> dict[str, Any]:
    """narrative-engine@2's cues and speakers: {scene?, mood?, present, speakers}."""
    story = story if isinstance(story, Mapping) else {}
    cues = story.get("cues") if isinstance(story.get("cues"), Mapping) else {}
    found: dict[str, Any] = {"present": [], "speakers": []}
    for field, limit in (("scene", 200), ("mood", 80)):
        if isinstance(cues.get(field), str) and cues[field].strip():
            found[field] = " ".join(cues[field].split())[:limit]
    # presentCharacterIds: the kernel's resolution of cues.present and the speakers, where the story has it.
    for name in [*(cues.get("present") or ()), *(story.get("presentCharacterIds") or ())]:
        if isinstance(name, str) and name.strip() and name.strip() not in found["present"]:
            found["present"].append(name.strip())
    for segment in story.get("segments") or ():
        speaker = segment.get("speaker") if isinstance(segment, Mapping) else None
        if segment.get("kind") in ("dialogue", "action") and isinstance(speaker, str) and speaker.strip() \
                and speaker.strip() not in found["speakers"]:
            found["speakers"].append(speaker.strip())
    return found


def cues_direction(cues: Mapping[str, Any] | None, stage: Mapping[str, Any] | None, characters=(), scenes=()) -> dict[str, Any]:
    """A stage-direction@1 from the story's cues alone: the scene cue when it names another scene, who the
    cues and speakers show entering, and, when cues.present lists the cast, who is no longer there."""
    cues = cues or {}
    stage = stage or {}
    direction: dict[str, Any] = {"enter": [], "exit": [], "performances": [], "reason": "the story's cues"}
    scene_cue = cues.get("scene")
    if scene_cue:
        known = find_scene(scene_cue, scenes)
        current = (stage.get("scene") or {})
        same = (known is not None and known.get("id") == current.get("id")) or bare(scene_cue) == bare(current.get("name")) \
            or (known is None and current.get("id") and find_scene(scene_cue, [s for s in scenes if s.get("id") == current.get("id")]))
        if not same:
            direction["scene"] = {"name": str(known["name"] if known else scene_cue)[:200], **({"id": str(known["id"])} if known else {})}
    # A new place starts from its own cast: whoever the cues name comes along.
    actors = [] if "scene" in direction else stage.get("actors") or []
    named = [*cues.get("present", []), *(s for s in cues.get("speakers", []) if s not in cues.get("present", []))]
    for name in named:
        candidate = actor(name, characters, 0)
        if candidate is not None and not any(same_actor(candidate, a) for a in actors):
            direction["enter"].append(name)
    if cues.get("present") and "scene" not in direction:
        listed = [actor(n, characters, 0) for n in named]
        for existing in actors:
            if not any(c is not None and same_actor(c, existing) for c in listed):
                direction["exit"].append(existing["name"])
    return direction


def resolve(current: Mapping[str, Any] | None, directions: list[Mapping[str, Any]], *, characters=(), scenes=(),
            turn: int, period: str | None = None, world_id: str | None = None) -> dict[str, Any]:
    """The stage after the turn: the committed one with the directions applied in order (overrides last),
    then the story clock's period as the time of day when no direction set one."""
    scenes = list(scenes)
    stage = {"scene": dict((current or {}).get("scene") or {}), "actors": [dict(a) for a in (current or {}).get("actors") or []],
             "since": int((current or {}).get("since", turn)), "turn": int((current or {}).get("turn", turn)), "worldId": world_id}
    changed: list[str] = []
    entered: list[str] = []
    left: list[str] = []
    reasons: list[str] = []
    timed = False

    def mark(what: str) -> None:
        if what not in changed:
            changed.append(what)

    ordered = [d for d in directions if not d.get("override")] + [d for d in directions if d.get("override")]
    for direction in ordered:
        if direction.get("reason"):
            reasons.append(str(direction["reason"]))
        scene = direction.get("scene")
        if isinstance(scene, Mapping) and scene.get("name"):
            known = find_scene(scene.get("id") or scene["name"], scenes) or find_scene(scene["name"], scenes)
            new = scene_from_world(known) if known else {"name": str(scene["name"])[:200]}
            for field in ("location", "lighting"):
                if scene.get(field):
                    new[field] = str(scene[field])
            if not new.get("timeOfDay") and stage["scene"].get("timeOfDay"):
                new["timeOfDay"] = stage["scene"]["timeOfDay"]
            if (new.get("id") or bare(new["name"])) != (stage["scene"].get("id") or bare(stage["scene"].get("name"))):
                before = stage["actors"]
                stage["scene"], stage["since"] = new, turn
                mark("scene")
                # A new place: its own cast, plus whoever the direction brings along.
                stage["actors"] = []
                for character_id in (known or {}).get("cast") or ():
                    found = actor(character_id, characters, turn)
                    if found is not None and not any(same_actor(found, a) for a in stage["actors"]):
                        stage["actors"].append(found)
                        entered.append(found["name"])
                for earlier in before:
                    if not any(same_actor(earlier, a) for a in stage["actors"]):
                        left.append(earlier["name"])
        for field, what in (("timeOfDay", "timeOfDay"), ("lighting", "lighting")):
            if direction.get(field):
                timed = timed or field == "timeOfDay"
                if stage["scene"].get(field) != direction[field]:
                    stage["scene"][field] = str(direction[field])
                    mark(what)
        for name in direction.get("exit") or ():
            gone = actor(name, characters, turn)
            kept = [a for a in stage["actors"] if gone is None or not same_actor(gone, a)]
            if len(kept) != len(stage["actors"]):
                left += [a["name"] for a in stage["actors"] if a not in kept]
                stage["actors"] = kept
                mark("cast")
        for name in [*(direction.get("enter") or ()), *(p.get("character") for p in direction.get("performances") or ())]:
            found = actor(name, characters, turn)
            if found is not None and not any(same_actor(found, a) for a in stage["actors"]):
                stage["actors"].append(found)
                entered.append(found["name"])
                if found["name"] in left:
                    left.remove(found["name"])
                mark("cast")
        for performance in direction.get("performances") or ():
            found = actor(performance["character"], characters, turn)
            for existing in stage["actors"]:
                if found is not None and same_actor(found, existing):
                    for field in PERFORMANCE:
                        if performance.get(field) and existing.get(field) != performance[field]:
                            existing[field] = str(performance[field])
                            mark("performance")
    if period and not timed and stage["scene"].get("name") and stage["scene"].get("timeOfDay") != period:
        stage["scene"]["timeOfDay"] = period
        mark("timeOfDay")
    if changed:
        stage["turn"] = turn
    stage.update({"changed": changed, "entered": entered, "left": sorted(set(left)), "reason": "; ".join(reasons)[:300]})
    return stage


def cast_of(stage: Mapping[str, Any] | None) -> dict[str, Any]:
    """scene-cast@1: who is on stage and where."""
    if not stage:
        return {"scene": None, "present": []}
    scene = {k: str(v) for k, v in (stage.get("scene") or {}).items() if k in ("id", "name", "location", "timeOfDay", "lighting") and v}
    present = [{k: a[k] for k in ("id", "name", "pose", "expression", "position", "since") if a.get(k) is not None}
               for a in stage.get("actors") or []]
    return {"scene": scene or None, "present": present}


def stage_text(stage: Mapping[str, Any] | None, locale: str = "en") -> str | None:
    """The stage as a few lines for the story's prompt."""
    if not stage or not (stage.get("scene") or {}).get("name"):
        return None
    zh = str(locale or "").startswith("zh")
    scene = stage["scene"]
    where = scene["name"] + (f" ({scene['location']})" if scene.get("location") else "")
    extras = [scene[f] for f in ("timeOfDay", "lighting") if scene.get(f)]
    lines = [f"Scene: {where}" + (f"; {', '.join(extras)}" if extras else "")]
    actors = []
    for a in stage.get("actors") or []:
        how = ", ".join(a[f] for f in PERFORMANCE if a.get(f))
        actors.append(f"{a['name']} ({how})" if how else a["name"])
    if zh:
        lines = [f"当前场景：{where}" + (f"；{'，'.join(extras)}" if extras else ""),
                 f"在场：{'、'.join(actors)}" if actors else "在场：除主角外无人"]
        lines.append("保持场景、光线和人物的位置与神态一致；人物登场或离场、场景转换都要在故事里写出来。")
    else:
        lines.append(f"On stage: {', '.join(actors)}" if actors else "On stage: nobody but the player's character")
        lines.append("Keep the place, the light and where the characters are consistent; show it in the story when someone enters or leaves or the scene moves.")
    return "\n".join(lines)

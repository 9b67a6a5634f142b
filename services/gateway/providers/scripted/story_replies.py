"""The scripted model's story replies (narrative-engine@2): short, varied, and on topic.

Templates are picked with a seeded generator (a hash of the conversation), so the same
conversation always gets the same story, and the player's last message is echoed so a
walkthrough reads as a reply to what the player did.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from services.gateway.chat import Message, Tool
from services.gateway.providers.scripted import plugin_writers
from services.gateway.providers.scripted.prose import (
    FIRST_PERSON,
    is_intention,
    is_speech,
    recollection,
    rotating,
    second_person,
    spoken,
)

NARRATIVE_ENGINE = "narrative-engine@2"
NARRATIVE_ENGINE_ID = "covel:contract:narrative-engine@2"

SCENES = (
    ("the lantern-lit harbor", "salt wind tugs at the ropes of the moored boats"),
    ("the old library", "dust turns slowly in the light from the high windows"),
    ("the forest road", "the pines lean close and the birds fall silent"),
    ("the market square", "stalls of copper pans and bright cloth crowd the cobbles"),
    ("the mountain inn", "a fire crackles and the common room smells of bread"),
    ("the ruined chapel", "ivy has claimed the broken arches and the air is cool"),
)
CHARACTERS = (
    ("Mira", "the harbor-master"),
    ("Old Tobin", "the innkeeper"),
    ("Sela", "a wandering scholar"),
    ("Captain Rhee", "a weathered sailor"),
    ("Brother Anselm", "a soft-spoken monk"),
    ("Kestrel", "a quick-eyed courier"),
)
# Details that fit any place: used when the world names its own scene, so the story does not import another one's.
AMBIENT = (
    "the lamps burn low and voices murmur nearby",
    "somewhere a door creaks and footsteps pass",
    "the air is still, as if the place were listening",
    "a draught stirs the dust and then is gone",
    "the light shifts, and shadows settle into the corners",
    "a distant sound carries in and fades",
    "someone laughs quietly and then thinks better of it",
)
MOODS = ("curious", "tense", "warm", "mysterious", "hopeful", "wistful")
OPENINGS = (
    "You decide to {action}.",
    "Without hesitating, you {action}.",
    "Taking a slow breath, you {action}.",
    "You {action}, and for a moment everything is still.",
)
CONSEQUENCES = (
    "In {scene}, {detail}, and your choice does not go unnoticed.",
    "Around you, {detail}; something in {scene} seems to shift in answer.",
    "The moment settles over {scene}; {detail}.",
    "A hush falls across {scene} while {detail}.",
    "Nobody in {scene} says a word at first; {detail}.",
    "For a breath {scene} holds still, and {detail}.",
)
LINES = (
    "Well now. Not many would {action_short}. I hope you know what you are doing.",
    "If you mean to {action_short}, you had better hear what I saw last night.",
    "Careful. The last traveller who tried to {action_short} never came back the same.",
    "Ha! I was wondering when someone would {action_short}. Come, I will show you.",
    "So you would {action_short}. Then listen before you start.",
    "Go on and {action_short}, if you must. I will be here when it is done.",
)
ACTIONS = (
    "{name} glances toward the door, then back at you, weighing something unsaid.",
    "{name} sets down a cup and leans in, voice dropping low.",
    "{name} folds a worn map and slides it across to you.",
    "{name} watches you for a long moment, saying nothing.",
    "{name} taps the table twice, thinking.",
    "{name} looks past you, toward the window and the dark beyond it.",
)
# A character's answer to a line the player says.
REPLIES = (
    "Hm. Say that again, slower, and tell me why it matters to you.",
    "You are not the first to ask me that tonight.",
    "Keep your voice down. Not everyone here is a friend.",
    "Fair words. Let us see whether they hold.",
    "That is kindly said. Most who pass through here say nothing at all.",
    "Ask what you came to ask; the night is not getting any younger.",
)
OPENING_SCENES = (
    "The story begins in {scene}, where {detail}.",
    "Dusk finds you in {scene}; {detail}.",
)
OPENING_LINES = (
    "You look like someone with a question. Ask it, then.",
    "Traveller! You arrived just in time. Something strange is happening here.",
)



def is_story_schema(name: str, schema: dict[str, Any] | None) -> bool:
    if name == NARRATIVE_ENGINE:
        return True
    if not schema:
        return False
    return schema.get("$id") == NARRATIVE_ENGINE_ID or schema.get("title") == NARRATIVE_ENGINE


def _action(player_text: str) -> str:
    """The player's message as a verb phrase in second person: "I open the door." -> "open the door"."""
    text = " ".join(player_text.split())
    text = second_person(FIRST_PERSON.sub("", text).rstrip(" .!?。！？"))
    if len(text) > 160:
        text = text[:157].rstrip() + "..."
    if text and text[0].isupper() and not text[:2].isupper():
        text = text[0].lower() + text[1:]
    return text


RECALLS = (
    "Not long ago you chose to {earlier}; the memory is still sharp.",
    "Ever since you decided to {earlier}, the place has felt different.",
    "You have not forgotten how you {earlier}.",
)


_INNER_I = re.compile(r"\bI\b")


def _second_person_sentence(player_text: str) -> str | None:
    """"At dusk I climb the path." -> "At dusk you climb the path."; None when the text starts with "I"."""
    text = " ".join(player_text.split()).rstrip(" .!?")
    if FIRST_PERSON.match(text) or not _INNER_I.search(text):
        return None
    text = second_person(text)
    return text[0].upper() + text[1:] + "."


def write_story(player_text: str, seed: str, earlier_player_texts: tuple[str, ...] = (), system: str = "",
                remembered: Sequence[str] = (), told: str = "") -> dict[str, Any]:
    """A narrative-engine@2 reply of 2-5 segments that answers `player_text`.

    The scene and its character stay the same for a whole session (chosen from the session's
    first player message), and a later turn recalls the previous action, so the story reads
    as one story and shows that the history reached the model. A memory-search hit
    (`remembered`, best first) is recalled instead, so a found memory shows in the story, once (`told`: what
    the story already said).
    """
    inputs = runtime_inputs(system)
    opening = _input_value(inputs, "opening")
    if isinstance(opening, dict) and opening.get("brief"):
        # The opening after the setup (pregame's session.opening@1): the first scene, not an answer to the form.
        player_text = ""
    rng = random.Random(seed)
    setting = random.Random(earlier_player_texts[0] if earlier_player_texts else player_text)
    scene, detail = setting.choice(SCENES)
    name, _role = setting.choice(world_cast(system) or CHARACTERS)
    # Session-stable start, one step a turn: no template (nor detail) repeats from one turn to the next.
    base, turn = setting.randrange(997), len(earlier_player_texts)
    if world_scene(system):
        scene = world_scene(system)
        scene = scene[0].lower() + scene[1:] if scene[:4] in ("The ", "A ", "An ") else scene
        detail = rotating(AMBIENT, base, turn)  # the world's own place: no detail of another scene
    action = _action(player_text)
    segments: list[dict[str, str]] = []
    sentence = _second_person_sentence(player_text)
    consequence = rotating(CONSEQUENCES, base, turn).format(scene=scene, detail=detail)
    if action and is_speech(player_text):
        segments.append({"kind": "narration", "text": spoken(player_text)})
        segments.append({"kind": "narration", "text": consequence})
        segments.append({"kind": "dialogue", "speaker": name, "text": rotating(REPLIES, base, turn)})
    elif action and action.isascii():
        segments.append({"kind": "narration", "text": sentence or rotating(OPENINGS, base, turn).format(action=action)})
        segments.append({"kind": "narration", "text": consequence})
        short = action if len(action) <= 60 and sentence is None else "do that"
        segments.append({"kind": "dialogue", "speaker": name, "text": rotating(LINES, base, turn).format(action_short=short)})
    elif action:
        segments.append({"kind": "narration", "text": f"You act: \u201c{action}\u201d"})
        segments.append({"kind": "narration", "text": consequence})
        segments.append({"kind": "dialogue", "speaker": name, "text": "Interesting. Go on, then; I am watching."})
    else:
        segments.append({"kind": "narration", "text": rng.choice(OPENING_SCENES).format(scene=scene, detail=detail)})
        segments.append({"kind": "dialogue", "speaker": name, "text": rng.choice(OPENING_LINES)})
    protagonist = (opening or {}).get("protagonist") if isinstance(opening, dict) else None
    if isinstance(protagonist, dict) and protagonist.get("name"):
        segments.insert(0, {"kind": "narration", "text": f"This is where the story of {protagonist['name']} begins."})
    verdict = check_line(inputs)
    if verdict and segments:
        segments.insert(1, {"kind": "narration", "text": verdict})
    staged = staged_events(inputs)
    earlier = _action(earlier_player_texts[-1]) if earlier_player_texts else ""
    # The best memory-search hit the story has not recalled yet (`told`): a memory comes back once.
    recalled = next((line for line in (recollection(hit, english=player_text.isascii()) for hit in remembered if hit.strip())
                     if line and line not in told), "")
    if recalled:
        segments.insert(1, {"kind": "narration", "text": recalled})
    elif earlier and earlier.isascii() and not is_speech(earlier_player_texts[-1]):
        segments.insert(1, {"kind": "narration", "text": rotating(RECALLS, base, turn).format(earlier=earlier)})
    if rng.random() < 0.5:
        segments.append({"kind": "action", "speaker": name, "text": rotating(ACTIONS, base, turn).format(name=name)})
    # A fired story event happens in this scene, as the plan stages it (else its cue), before the rest is cut.
    segments[1:1] = [{"kind": "narration", "text": text} for text in staged]
    # Capitalise the first letter of every segment.
    for segment in segments:
        segment["text"] = segment["text"][0].upper() + segment["text"][1:]
    return {
        "segments": segments[:5],
        "cues": {"scene": scene[0].upper() + scene[1:], "present": [name], "mood": rng.choice(MOODS)},
        "yield": "user",
    }


# ---- the builtin plugins' structured replies and tool calls (automatic mode) -------------------
#
# The scripted model reads what a real one would: the system prompt (the world's characters,
# <runtime-inputs>, selfData rows), the player's message and the tools offered. These writers
# give every builtin plugin valid, on-topic data, so an offline session exercises all of them.

_INPUTS = re.compile(r"<runtime-inputs>\s*(\{.*?\})\s*</runtime-inputs>", re.DOTALL)
_ROWS = re.compile(r"^- ([^|\n]+?) \| (\{.*\})\s*$", re.MULTILINE)
_CAST_LINE = re.compile(r"^- ([A-Z][\w' .-]{0,40}?), ([^:\n]{2,60})(?::|$)", re.MULTILINE)
_SCENE_LINE = re.compile(r"^Scene: (.{3,120})$", re.MULTILINE)
_ARTICLE = r"(?:the |a |an |some |my |one |two |three |\d+ )?"
_GAIN = re.compile(r"\b(?:pick up|picks up|take|takes|grab|grabs|buy|buys|pocket|collect|find)\s+" + _ARTICLE + r"([a-z][a-z -]{1,30}?)(?=[.,!?;]| from | and | off | on | in |$)", re.IGNORECASE)
_LOSE = re.compile(r"\b(?:drop|drops|give|gives|hand over|sell|sells|throw|throws|leave|spend|pay)\s+" + _ARTICLE + r"([a-z][a-z -]{1,30}?)(?=[.,!?;]| to | at | for | on | and |$)", re.IGNORECASE)
_EQUIP = re.compile(r"\b(?:light|lights|raise|hold up|wield|wear|put on|unfold|draw)\s+(?:the |my |a )?([a-z][a-z -]{1,30}?)(?=[.,!?;]| and | to | at |$)", re.IGNORECASE)
_FRIENDLY = ("thank", "help", "smile", "kind", "gently", "buy a drink", "comfort", "promise", "谢", "帮")
_HOSTILE = ("threaten", "insult", "shove", "attack", "lie to", "steal", "mock", "shout at", "威胁", "骂")


def system_text(messages: Sequence[Message]) -> str:
    return next((m.content for m in messages if m.role == "system"), "")


def runtime_inputs(system: str) -> dict[str, Any]:
    match = _INPUTS.search(system)
    if not match:
        return {}
    try:
        value = __import__("json").loads(match.group(1))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def self_data_rows(system: str, tag: str) -> dict[str, Any]:
    """`- key | {json}` rows of one io.selfData block."""
    match = re.search(rf"<{re.escape(tag)}>\n(.*?)\n</{re.escape(tag)}>", system, re.DOTALL)
    rows: dict[str, Any] = {}
    for key, text in _ROWS.findall(match.group(1) if match else ""):
        try:
            rows[key.strip()] = __import__("json").loads(text)
        except ValueError:
            continue
    return rows


def world_cast(system: str) -> tuple[tuple[str, str], ...]:
    """(name, role) of the characters a world's prompt segment lists under "Characters:"."""
    at = system.find("Characters:")
    return tuple((name.strip(), role.strip()) for name, role in _CAST_LINE.findall(system[at:])) if at >= 0 else ()


def world_scene(system: str) -> str:
    match = _SCENE_LINE.search(system)
    return match.group(1).strip() if match else ""


def _input_value(inputs: dict[str, Any], binding: str) -> Any:
    slot = inputs.get(binding)
    return slot.get("value") if isinstance(slot, dict) else None


def staged_events(inputs: dict[str, Any]) -> list[str]:
    """One narration per event story-events fired this turn (story-event-cue@1): its plan's beats, else its cue."""
    cue, plan = _input_value(inputs, "storyEvent"), _input_value(inputs, "storyEventPlan")
    events = cue.get("events") if isinstance(cue, dict) else None
    plans = {p.get("id"): p for p in (plan.get("events") or [])} if isinstance(plan, dict) else {}
    staged = []
    for event in events if isinstance(events, list) else []:
        planned = plans.get(event.get("id")) if isinstance(event, dict) else None
        beats = planned.get("beats") if isinstance(planned, dict) else None
        text = " ".join(str(b) for b in beats) if isinstance(beats, list) and beats else (event.get("cue") if isinstance(event, dict) else "")
        if text:
            staged.append(str(text))
    return staged[:2]


def check_line(inputs: dict[str, Any]) -> str:
    """A sentence that tells the dice's verdict (runtime-inputs.check of the narrator)."""
    checks = (_input_value(inputs, "check") or {}).get("checks") if isinstance(_input_value(inputs, "check"), dict) else None
    if not checks:
        return ""
    outcome = checks[0].get("outcome", "")
    return {
        "critical-success": "It goes better than you dared to hope.",
        "success": "It works, though not without effort.",
        "failure": "It does not go the way you hoped.",
        "critical-failure": "It goes badly wrong.",
    }.get(outcome, "")


def _names_in(value: Any) -> list[str]:
    """Speakers of story segments in a bound input (runtime-inputs.story.value)."""
    names: list[str] = []
    if isinstance(value, list):
        for segment in value:
            if isinstance(segment, dict) and segment.get("speaker") and segment["speaker"] not in names:
                names.append(str(segment["speaker"]))
    return names


def _story_names(inputs: dict[str, Any]) -> list[str]:
    names = _names_in(_input_value(inputs, "story"))
    text = _input_value(inputs, "narrative")
    if isinstance(text, str):
        for name in re.findall(r"\b([A-Z][a-z]+(?: [A-Z][a-z]+)?):", text):
            if name not in names:
                names.append(name)
    return names


def write_suggestions(player_text: str, inputs: dict[str, Any], seed: str) -> dict[str, Any]:
    rng = random.Random(seed)
    names = _story_names(inputs) or ["the nearest stranger"]
    who = rng.choice(names)
    options = [
        f"I ask {who} what happened here.",
        f"I ask {who} about the lighthouse.",
        "I look around carefully for anything out of place.",
        "I sit by the window and listen to the talk in the room.",
        "I step outside and look towards Gull Point.",
        "I check what I am carrying.",
    ]
    rng.shuffle(options)
    last = " ".join(player_text.split()).lower()
    chosen = [option for option in options if option.lower() != last][:4]
    return {"suggestions": chosen}


def _item_names(rows: dict[str, Any]) -> dict[str, str]:
    return {key: str(row.get("name", key)) for key, row in rows.items() if isinstance(row, dict)}


def write_inventory_changes(player_text: str, system: str) -> dict[str, Any]:
    carried = _item_names(self_data_rows(system, "inventory"))
    changes: list[dict[str, Any]] = []

    def owned(phrase: str) -> str | None:
        phrase = phrase.strip().lower().rstrip("s")
        return next((name for name in carried.values() if phrase and (phrase in name.lower() or name.lower().rstrip("s") in phrase)), None)

    for match in _GAIN.finditer(player_text):
        if is_intention(player_text, match.start()):
            continue  # "I will find the missing boats": nothing is found yet
        name = match.group(1).strip()
        if len(changes) < 4 and name.lower() not in ("it", "them", "a look", "look", "a breath", "breath", "a seat", "seat"):
            changes.append({"item": owned(name) or name, "delta": 1, "reason": f"the player took the {name}"})
    for match in _LOSE.finditer(player_text):
        name = None if is_intention(player_text, match.start()) else owned(match.group(1))
        if name and len(changes) < 6:
            changes.append({"item": name, "delta": -1, "reason": f"the player parted with the {name}"})
    for phrase in _EQUIP.findall(player_text):
        name = owned(phrase)
        if name and not any(change["item"] == name for change in changes):
            changes.append({"item": name, "delta": 0, "equip": True, "reason": f"the player took the {name} in hand"})
    return {"changes": changes}


def write_affinity_changes(player_text: str, inputs: dict[str, Any]) -> dict[str, Any]:
    lowered = player_text.lower()
    delta = -3 if any(word in lowered for word in _HOSTILE) else 2 if any(word in lowered for word in _FRIENDLY) else 1
    names = [name for name in _story_names(inputs) if name.lower() not in ("you", "the player")]
    return {"changes": [{"character": name, "delta": delta, "reason": "how the player treated them this turn"} for name in names[:3]]}


def memory_record(call_messages: Sequence[Message], system: str) -> dict[str, Any] | None:
    """A memories-upsert value from the turn digest: the player's action as one sentence."""
    digest = _input_value(runtime_inputs(system), "digest")
    if not isinstance(digest, dict):
        return None
    action = _action(str(digest.get("playerMessage") or ""))
    if not action or not action.isascii():
        return None
    text = f"The player chose to {action}."
    slug = re.sub(r"[^a-z0-9]+", "-", action.lower()).strip("-")[:48] or "memory"
    return {"id": slug, "kind": "event", "text": text}


STRUCTURED_WRITERS = ("scene-prompts@1", "inventory.changes@1", "affinity.changes@1")


# Trackers the scripted story never changes anything for: they get "no change" (a schema instance would be noise).
NO_CHANGE_REPLIES: dict[str, dict[str, Any]] = {"character-changes": {"changes": []}}
NO_CHANGE_TOOLS: dict[str, dict[str, Any]] = {"update-dimensions": {"updates": []}}


def structured_reply(name: str, schema: dict[str, Any] | None, messages: Sequence[Message], player_text: str, seed: str) -> dict[str, Any] | None:
    """The builtin plugins' JSON answers, by output contract; None for other schemas."""
    if name in NO_CHANGE_REPLIES:
        return dict(NO_CHANGE_REPLIES[name])
    title = (schema or {}).get("title") if isinstance(schema, dict) else None
    contract = title if title in STRUCTURED_WRITERS else next((c for c in STRUCTURED_WRITERS if name == c.replace("@", "-")), None)
    system = system_text(messages)
    inputs = runtime_inputs(system)
    if contract is None:
        writer = plugin_writers.writer_for(name, schema)
        return writer(plugin_writers.WriterCall(player_text, system, inputs, seed, messages=messages)) if writer else None
    if contract == "scene-prompts@1":
        return write_suggestions(player_text, inputs, seed)
    if contract == "inventory.changes@1":
        return write_inventory_changes(player_text, system)
    return write_affinity_changes(player_text, inputs)


def planned_tool_call(messages: Sequence[Message], tools: Sequence[Tool], tool_choice: str, player_text: str) -> tuple[str, dict[str, Any]] | None:
    """A tool call the builtin plugins' agents expect, or None to answer (or fall back to schema filling).

    - memory-search, once per turn, when the story has history: the player's words as the query;
    - memories-upsert, once: a memory of the turn's action (memory/extract);
    - runtime-done when it is offered and a business tool already ran;
    - update-dimensions with no change (world-init's dimension tracker).
    """
    offered = {tool.name: tool for tool in tools}
    called = [call.name for message in messages for call in message.tool_calls]
    earlier = [m for m in messages if m.role == "assistant" and not m.tool_calls and m.content.strip()]
    if "memory-search" in offered and "memory-search" not in called and earlier and player_text:
        return "memory-search", {"query": player_text[:200], "limit": 3}
    if "memories-upsert" in offered and "memories-upsert" not in called:
        record = memory_record(messages, system_text(messages))
        if record is not None:
            return "memories-upsert", {"key": record["id"], "value": record}
    for tool_name, arguments in NO_CHANGE_TOOLS.items():
        if tool_name in offered and tool_name not in called:
            return tool_name, dict(arguments)
    plans = [(tool_name, plan) for tool_name, plan in plugin_writers.tool_plans().items() if tool_name in offered and tool_name not in called]
    if plans:
        system = system_text(messages)
        call = plugin_writers.WriterCall(player_text, system, runtime_inputs(system), "", tuple(called), messages)
        for tool_name, plan in plans:
            planned = plan(call)
            if planned is not None:
                return tool_name, planned
    business = [name for name in called if name not in ("runtime-done", "emit-event", "memory-search")]
    if "runtime-done" in offered and business:
        return "runtime-done", {"summary": "done"}
    return None

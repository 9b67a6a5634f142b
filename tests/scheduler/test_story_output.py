"""Story normalisation (narrative-engine@2): each lenient rule of the spec, before commit."""

from __future__ import annotations

import json

import pytest

from services.scheduler.execution.story_output import (
    MAX_MOOD_CHARS,
    MAX_PRESENT,
    MAX_SCENE_CHARS,
    MAX_SEGMENT_CHARS,
    MAX_SEGMENTS,
    EmptyStory,
    normalize_story,
)


def test_plain_text_becomes_one_narration_segment_per_paragraph() -> None:
    story = normalize_story("The rain falls.\n\nA door creaks open.")
    assert story.segments == [{"kind": "narration", "text": "The rain falls."}, {"kind": "narration", "text": "A door creaks open."}]
    assert story.yield_to == "user" and story.cues == {}


def test_an_unknown_kind_is_narration_and_dialogue_without_speaker_is_kept_unsigned() -> None:
    story = normalize_story({"segments": [{"kind": "monologue", "speaker": "Mara", "text": "Hm."},
                                          {"kind": "dialogue", "text": "Who goes there?"}]})
    assert story.segments == [{"kind": "narration", "text": "Hm."}, {"kind": "dialogue", "text": "Who goes there?"}]


def test_a_narration_speaker_is_dropped_and_other_speakers_kept() -> None:
    story = normalize_story(json.dumps({"segments": [
        {"kind": "narration", "speaker": "Narrator", "text": "Night."},
        {"kind": "dialogue", "speaker": "  Mara ", "text": "Halt!"},
        {"kind": "action", "speaker": "Mara", "text": "draws her sword"},
    ]}))
    assert story.segments == [
        {"kind": "narration", "text": "Night."},
        {"kind": "dialogue", "speaker": "Mara", "text": "Halt!"},
        {"kind": "action", "speaker": "Mara", "text": "draws her sword"},
    ]


def test_blank_lines_inside_a_segment_fold_into_one_newline() -> None:
    story = normalize_story({"segments": [{"kind": "narration", "text": "One.\n\n\nTwo."}]})
    assert story.segments == [{"kind": "narration", "text": "One.\nTwo."}]


def test_text_over_4000_characters_splits_on_newlines() -> None:
    line = "x" * 1500
    story = normalize_story({"segments": [{"kind": "dialogue", "speaker": "Mara", "text": "\n".join([line] * 4)}]})
    assert [len(segment["text"]) for segment in story.segments] == [1500 * 2 + 1, 1500 * 2 + 1]
    assert all(segment["kind"] == "dialogue" and segment["speaker"] == "Mara" for segment in story.segments)
    # One line longer than the limit is cut at the limit.
    long = normalize_story("y" * (MAX_SEGMENT_CHARS + 10))
    assert [len(segment["text"]) for segment in long.segments] == [MAX_SEGMENT_CHARS, 10]


def test_more_than_60_segments_merge_neighbours_of_the_same_kind_and_speaker_first() -> None:
    alternating = [{"kind": "narration", "text": f"n{i}"} if i % 2 else {"kind": "dialogue", "speaker": "Mara", "text": f"d{i}"}
                   for i in range(40)]
    same = [{"kind": "narration", "text": f"tail{i}"} for i in range(30)]
    story = normalize_story({"segments": alternating + same})
    # The 30 trailing narrations joined the last alternating narration; the alternating ones could not merge.
    assert len(story.segments) == 40
    assert story.segments[-1]["text"] == "n39\n" + "\n".join(f"tail{i}" for i in range(30))


def test_more_than_60_segments_that_cannot_merge_lose_the_last_ones() -> None:
    raw = [{"kind": "dialogue", "speaker": f"s{i % 2}", "text": f"line {i}"} for i in range(70)]
    story = normalize_story({"segments": raw})
    assert len(story.segments) == MAX_SEGMENTS
    assert story.segments[-1]["text"] == f"line {MAX_SEGMENTS - 1}"


def test_sixty_segments_are_left_alone() -> None:
    raw = [{"kind": "narration", "text": f"p{i}"} for i in range(MAX_SEGMENTS)]
    assert len(normalize_story({"segments": raw}).segments) == MAX_SEGMENTS


@pytest.mark.parametrize(
    "reply",
    [
        "Rain.\n\nWhat will you do?",
        "Rain.\n\nWhat will you do?\n1. Fight\n2. Flee",
        "Rain.\n\nWhat will you do?\n\n1. Fight\n2. Flee",
        "Rain.\n\n- Fight\n- Flee\n\nSo, what do you do next?",
        "Rain.\n\n你会怎么做？\n\n1、战斗\n2、逃跑",
    ],
)
def test_a_trailing_what_will_you_do_with_its_options_is_dropped(reply: str) -> None:
    assert normalize_story(reply).segments == [{"kind": "narration", "text": "Rain."}]


def test_an_option_list_in_its_own_segment_after_the_question_is_dropped() -> None:
    story = normalize_story({"segments": [
        {"kind": "narration", "text": "Rain."},
        {"kind": "narration", "text": "What will you do?"},
        {"kind": "narration", "text": "1. Fight\n2. Flee"},
    ]})
    assert story.segments == [{"kind": "narration", "text": "Rain."}]


def test_lists_and_questions_that_are_part_of_the_story_stay() -> None:
    kept = normalize_story("The note reads:\n\n1. Bread\n2. Milk")
    assert [segment["text"] for segment in kept.segments] == ["The note reads:", "1. Bread\n2. Milk"]
    spoken = normalize_story({"segments": [{"kind": "dialogue", "speaker": "Mara", "text": "What will you do?"}]})
    assert spoken.segments == [{"kind": "dialogue", "speaker": "Mara", "text": "What will you do?"}]
    middle = normalize_story("What will you do?\n\nThe stranger waits.")
    assert len(middle.segments) == 2


@pytest.mark.parametrize("reply", ["", "   \n\n ", {"segments": []}, {"segments": [{"kind": "narration", "text": "  "}, 3]},
                                   "What will you do?\n\n1. Fight", {"cues": {"scene": "Gate"}}])
def test_a_story_without_text_fails(reply) -> None:
    with pytest.raises(EmptyStory):
        normalize_story(reply)


def test_narrative_output_joins_the_segment_texts_with_blank_lines() -> None:
    story = normalize_story({"segments": [{"kind": "narration", "text": "Night."}, {"kind": "dialogue", "speaker": "Mara", "text": "Halt!"}],
                             "yield": "continue"})
    assert story.narrative_output == "Night.\n\nHalt!"
    assert story.to_output() == {"segments": story.segments, "yield": "continue", "narrativeOutput": "Night.\n\nHalt!"}


def test_yield_is_user_unless_continue() -> None:
    assert normalize_story({"text": "Hi.", "yield": "later"}).yield_to == "user"
    assert normalize_story({"text": "Hi.", "yield": "continue"}).yield_to == "continue"


def test_cues_are_kept_within_their_limits() -> None:
    story = normalize_story({
        "segments": [{"kind": "narration", "text": "Night."}],
        "cues": {"scene": "s" * 300, "present": ["Mara", " Mara ", "", 7, *[f"n{i}" for i in range(40)]], "mood": "m" * 100,
                 "weather": "rain"},
    })
    assert story.cues["scene"] == "s" * MAX_SCENE_CHARS
    assert story.cues["mood"] == "m" * MAX_MOOD_CHARS
    assert story.cues["present"] == ["Mara", *[f"n{i}" for i in range(MAX_PRESENT - 1)]]
    assert set(story.cues) == {"scene", "present", "mood"}, "unknown cue keys are left out"
    assert story.to_output()["cues"] == story.cues


def test_cues_of_the_wrong_type_are_dropped() -> None:
    story = normalize_story({"segments": [{"kind": "narration", "text": "Night."}], "cues": {"scene": 3, "present": "Mara", "mood": " "}})
    assert story.cues == {} and "cues" not in story.to_output()

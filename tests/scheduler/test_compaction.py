"""Which messages a compaction folds, and how the history reads after one."""

from __future__ import annotations

from covel.common.v1 import common_pb2
from services.scheduler.agent.context import SUMMARY_HEADING, history_messages
from services.scheduler.turn.compaction import foldable
from shared.structs import to_struct


def log(*entries) -> list[common_pb2.Message]:
    messages = []
    for seq, (role, text, *meta) in enumerate(entries, start=1):
        messages.append(common_pb2.Message(seq=seq, role=role, text=text, metadata=to_struct(meta[0] if meta else {})))
    return messages


def test_foldable_keeps_the_last_turns_and_counts_since_the_summary():
    history = log(("player", "a" * 10), ("story", "b" * 10), ("player", "c" * 10), ("story", "d" * 10), ("player", "e" * 10))
    folded, summary, size = foldable(history, keep_turns=1)
    assert [m.seq for m in folded] == [1, 2, 3, 4] and summary is None and size == 50
    assert [m.seq for m in foldable(history, keep_turns=3)[0]] == []
    summarised = history + [common_pb2.Message(seq=6, role="summary", text="SSSSS", metadata=to_struct({"throughSeq": 2}))]
    folded, summary, size = foldable(summarised, keep_turns=1)
    assert summary.text == "SSSSS" and [m.seq for m in folded] == [3, 4] and size == 30 + 5


def test_history_reads_the_summary_in_place_of_what_it_folded():
    history = log(("player", "old move"), ("story", "old story"), ("player", "new move"), ("story", "new story"),
                  ("summary", "They met at the gate.", {"throughSeq": 2}))
    chat = history_messages(history, max_turns=10)
    assert chat[0] == {"role": "system", "content": f"{SUMMARY_HEADING}\nThey met at the gate."}
    assert [m["content"] for m in chat[1:]] == ["new move", "new story"]
    # includeSummaries: false drops the summary, the folded turns stay out.
    assert [m["content"] for m in history_messages(history, 10, include_summaries=False)] == ["new move", "new story"]

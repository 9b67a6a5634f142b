"""rank_texts(query, texts): the BM25 ranking the kernel's memory-search uses, for plugin code too.

Written here rather than taken from a library because each hit also needs `matched` (how many
query terms the text has) and `coverage` (0..1: how much of the query it answers), which the
BM25 packages do not report, and because they pull in numpy for a few dozen texts.

Terms: words of letters and digits, lower-cased; CJK text (no spaces) is cut into overlapping
character pairs, so 旧城门 matches 城门.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

_WORD = re.compile(r"[0-9a-zà-ÿ]+", re.IGNORECASE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
K1 = 1.2
B = 0.75


def search_terms(text: str) -> list[str]:
    """The terms of a text, in order (words; CJK runs as character pairs, a single character alone)."""
    terms = [word.lower() for word in _WORD.findall(text)]
    for run in _CJK.findall(text):
        terms += [run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]
    return terms


@dataclass(frozen=True)
class RankedText:
    index: int
    score: float
    matched: int
    coverage: float


def rank_texts(query: str, texts: list[str], *, limit: int = 10, min_coverage: float = 0.0) -> list[RankedText]:
    """Texts that share terms with the query, best first (BM25), at most `limit`."""
    wanted = list(dict.fromkeys(search_terms(query)))
    if not wanted or not texts:
        return []
    documents = [Counter(search_terms(text)) for text in texts]
    average_length = sum(sum(doc.values()) for doc in documents) / len(documents) or 1.0
    frequency = {term: sum(1 for doc in documents if term in doc) for term in wanted}
    ranked = []
    for index, doc in enumerate(documents):
        length = sum(doc.values())
        score = 0.0
        matched = 0
        for term in wanted:
            count = doc.get(term, 0)
            if not count:
                continue
            matched += 1
            idf = math.log(1 + (len(documents) - frequency[term] + 0.5) / (frequency[term] + 0.5))
            score += idf * count * (K1 + 1) / (count + K1 * (1 - B + B * length / average_length))
        coverage = matched / len(wanted)
        if matched and coverage >= min_coverage:
            ranked.append(RankedText(index, score, matched, coverage))
    ranked.sort(key=lambda hit: (-hit.score, hit.index))
    return ranked[:limit]


def search_excerpt(text: str, query: str, width: int = 240) -> str:
    """About `width` characters of `text` around its first query term."""
    if len(text) <= width:
        return text
    lowered = text.lower()
    positions = [lowered.find(term) for term in search_terms(query) if term in lowered]
    start = max(0, min(positions) - width // 4) if positions else 0
    excerpt = text[start:start + width]
    return ("…" if start else "") + excerpt + ("…" if start + width < len(text) else "")

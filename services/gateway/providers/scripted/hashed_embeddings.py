"""The scripted model's embedder: offline, deterministic, no model weights.

A text becomes a bag of hashed features folded into `DIMENSIONS` numbers and L2-normalised:
its words (stop words left out) and the character trigrams of each word with its edges marked
(`<li`, `lig`, … `ht>`). Texts sharing words are close, and so are texts whose words share a
stem or a part: "light" and "lighthouse", "drowned" and "drowning". It knows no synonyms:
"boat" and "ship" are as far apart as any two words (a real embedding model closes that gap).
CJK runs count as overlapping character pairs, as in the kernel's BM25 (shared/plugin_sdk/text_rank.py).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import defaultdict

DIMENSIONS = 384
MODEL = "scripted-hashed-ngrams-v1"
WORD_WEIGHT = 1.0
TRIGRAM_WEIGHT = 0.5
_WORD = re.compile(r"[0-9a-zà-ÿ]+", re.IGNORECASE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
STOP_WORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "you", "your"]
)


def features(text: str) -> dict[str, float]:
    """The weighted features of a text: words and their edge-marked character trigrams."""
    found: defaultdict[str, float] = defaultdict(float)
    for word in (w.lower() for w in _WORD.findall(text)):
        if word in STOP_WORDS:
            continue
        found["w:" + word] += WORD_WEIGHT
        marked = f"<{word}>"
        for i in range(len(marked) - 2):
            found["c:" + marked[i:i + 3]] += TRIGRAM_WEIGHT
    for run in _CJK.findall(text):
        for pair in ([run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]):
            found["w:" + pair] += WORD_WEIGHT
    return found


def _bucket(feature: str) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    number = int.from_bytes(digest, "little")
    # The sign bit spreads collisions around zero instead of piling them up.
    return number % DIMENSIONS, (1.0 if number >> 63 else -1.0)


def embed_text(text: str) -> list[float]:
    """One L2-normalised vector of `DIMENSIONS` numbers (all zeros for a text with no features)."""
    vector = [0.0] * DIMENSIONS
    for feature, weight in features(text).items():
        index, sign = _bucket(feature)
        # Sublinear: a word said five times is not five times the meaning.
        vector[index] += sign * (1.0 + math.log(weight)) if weight >= 1 else sign * weight
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector

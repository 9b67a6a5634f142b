"""How many tokens a model request takes, estimated alike by the gateway (is it within a model's context window?)
and the scheduler (how much the context-overflow finalizer must trim): no tokenizer, a bound that errs high.

ASCII text counts a token per 4 characters (rounded up), any other character a token each (CJK text runs about
one token a character), and each message 4 tokens of framing. Tool definitions count as their JSON text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

MESSAGE_OVERHEAD = 4


def text_tokens(text: str) -> int:
    if not text:
        return 0
    ascii_chars = len(text.encode("ascii", "ignore"))
    return -(-ascii_chars // 4) + (len(text) - ascii_chars)


def request_tokens(messages: Iterable[Sequence[str]], tools: Iterable[str] = ()) -> int:
    """`messages`: each message's texts (its content, each tool call's name and arguments); `tools`: each tool
    definition's JSON text."""
    total = sum(MESSAGE_OVERHEAD + sum(text_tokens(text) for text in texts) for texts in messages)
    return total + sum(text_tokens(tool) for tool in tools)

"""A sandbox worker's notes (ctx.propose, ctx.emit_event, world reads) are untrusted input to the host: a note that
is not one is refused and logged, never a failure of the call (services/scheduler/function/sandboxed.py)."""

from __future__ import annotations

from types import SimpleNamespace

from services.scheduler.function.sandboxed import notes


class Exploding:
    """A world view whose note_read raises something else than ValueError."""

    def note_read(self, name: str) -> None:
        raise TypeError("boom")


def test_a_note_that_is_not_one_is_refused_not_raised() -> None:
    proposals = []
    context = SimpleNamespace(runtime_id="p/r", world=Exploding(), propose=lambda kind, payload: proposals.append(kind),
                              emit_event=lambda topic, payload: None)
    apply = notes(context)  # type: ignore[arg-type]
    apply("world_read", ["characters"])  # TypeError inside: refused
    apply("teleport", [1, 2, 3])  # unknown note: refused
    apply("propose", [{"not": "a kind"}, {}])  # str() of a dict kind: the host's propose decides
    assert proposals == ["{'not': 'a kind'}"]

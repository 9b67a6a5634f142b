"""The types the app hooks of the Python hookspecs use (spec: python-hookspecs, "App Hooks").

    provide_model_options(session_id, workspace) -> ModelOptions | None
    provide_environment(session_id, workspace) -> Environment | None
    provide_tape_store() -> TapeStore | AsyncTapeStore | None
    build_tape_context() -> TapeContext
    provide_tape_sidecar() -> TapeSidecar
    provide_channels(message_handler: MessageHandler) -> list[Channel]
    admit_message(session_id, message, turn: TurnSnapshot) -> AdmitDecision | None
    provide_steering_inbox() -> SteeringInbox | None

Which of them the kernel calls today, and onto what, is docs/hookspecs.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from shared.plugin_sdk.turn_types import Envelope, Tape


@dataclass(frozen=True)
class ModelOptions:
    """A session's model choice: a gateway slot (`story`, `fast`, …) and/or a model, and call options."""

    slot: str | None = None
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Environment:
    """Variables and a working folder a session's runtimes see."""

    variables: dict[str, str] = field(default_factory=dict)
    workspace: str | None = None


class TapeStore(Protocol):
    """Where tapes (conversation logs) are kept."""

    def list_tapes(self) -> list[str]: ...

    def read(self, tape: str) -> list[dict[str, Any]] | None: ...

    def append(self, tape: str, entry: dict[str, Any]) -> None: ...


class AsyncTapeStore(Protocol):
    """TapeStore with coroutine methods."""

    async def list_tapes(self) -> list[str]: ...

    async def read(self, tape: str) -> list[dict[str, Any]] | None: ...

    async def append(self, tape: str, entry: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class TapeContext:
    """How a tape becomes a model's context: which entries (`select`) and how each is rendered."""

    select: Callable[[Tape], Sequence[dict[str, Any]]] | None = None
    render: Callable[[dict[str, Any]], dict[str, Any]] | None = None


class TapeSidecar(Protocol):
    """Something that hears of every entry appended to a tape (an index, a mirror)."""

    def on_append(self, tape: str, entry: dict[str, Any]) -> None: ...


# What a channel calls with each inbound message: it submits a turn.
MessageHandler = Callable[[Envelope], Awaitable[None]]


class Channel(Protocol):
    """An inbound/outbound channel: started with the hosting service, stopped with it."""

    @property
    def name(self) -> str: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, message: Envelope) -> bool: ...


@dataclass(frozen=True)
class TurnSnapshot:
    """The session's running turn, as admit_message sees it (`turn_id` "" when none runs)."""

    session_id: str
    turn_id: str = ""
    running: bool = False
    step: int = 0
    pending: int = 0


@dataclass(frozen=True)
class AdmitDecision:
    """What happens to a message submitted while a turn runs: queued for its own turn, merged into
    the running turn as steering, or refused with a reason."""

    action: Literal["queue", "steer", "refuse"] = "queue"
    reason: str = ""

    @classmethod
    def queue(cls) -> AdmitDecision:
        return cls("queue")

    @classmethod
    def steer(cls) -> AdmitDecision:
        return cls("steer")

    @classmethod
    def refuse(cls, reason: str) -> AdmitDecision:
        return cls("refuse", reason)


class SteeringInbox(Protocol):
    """Messages waiting to join a running turn: drained at each MessagesPending."""

    def drain(self, session_id: str) -> list[Envelope]: ...

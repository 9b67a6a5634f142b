"""Gateway event keys: the second hook family (spec: gateway-event-hooks), one table for all.

A handler subscribes to an exact key (`command:new`) or to a bare family (`command`) with
`covel.on_event(key, handler)` and receives an `InternalEvent`. How long the producer waits:

- awaited: the producer waits for every handler (each bounded by its own timeout, which
  stops the waiting, never the handler);
- observed: the producer does not wait at all;
- bounded: the producer waits at most the event's budget (shutdown 5 s, pre-restart 10 s);
  handlers still running after it are not cancelled.

`session:compact` is not a family. Unknown keys (`command:nwe`, custom keys) still register,
with a warning; the kernel never emits them: custom keys fire only when code emits them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Delivery(StrEnum):
    AWAITED = "awaited"
    OBSERVED = "observed"
    BOUNDED = "bounded"


@dataclass(frozen=True)
class EventKey:
    key: str
    delivery: Delivery
    # Where this system emits it; "" when nothing in this system produces it.
    fired_at: str
    # Context fields the producer always sets, and those it sets only when it knows them.
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    # Bounded events: how long the producer waits by default.
    budget_ms: int = 0

    @property
    def family(self) -> str:
        return self.key.split(":", 1)[0]


FAMILIES: tuple[str, ...] = ("command", "session", "agent", "gateway", "message")

_COMPACTION = ("sessionId", "missingSessionKey", "messageCount")
_MESSAGE_MEDIA = ("from", "to", "body", "bodyForAgent", "timestamp", "conversationId", "messageId", "senderId",
                  "senderName", "senderUsername", "provider", "surface", "media")

EVENT_KEYS: tuple[EventKey, ...] = (
    EventKey("command:new", Delivery.AWAITED, "Scheduler.CreateSession, after the session is stored",
             ("sessionEntry", "commandSource", "cfg"), ("agentId", "previousSessionEntry", "senderId", "workspaceDir", "storePath")),
    EventKey("command:reset", Delivery.AWAITED, "Scheduler.ResetSession, after the successor session is stored",
             ("sessionEntry", "commandSource", "cfg"), ("agentId", "previousSessionEntry", "senderId", "workspaceDir", "storePath")),
    EventKey("command:stop", Delivery.AWAITED, "Scheduler.Cancel, after the running turn was told to stop",
             (), ("sessionEntry", "sessionId", "commandSource", "senderId")),
    EventKey("session:auto-reset", Delivery.OBSERVED, "",
             ("cfg", "sessionEntry", "reason"),
             ("agentId", "workspaceDir", "storePath", "sessionFile", "transcriptArchived", "nextSessionId", "nextSessionKey")),
    EventKey("session:compact:before", Delivery.AWAITED, "history compaction, before the job",
             (*_COMPACTION, "messageCountOriginal"), ("tokenCount", "tokenCountOriginal")),
    EventKey("session:compact:after", Delivery.AWAITED, "history compaction, after it succeeded",
             (*_COMPACTION, "compactedCount"), ("tokenCount", "summaryLength", "tokensBefore", "tokensAfter", "firstKeptEntryId")),
    EventKey("session:patch", Delivery.OBSERVED, "Scheduler.SetPluginApprovals, after the patch is stored",
             ("sessionEntry", "patch", "cfg")),
    EventKey("agent:bootstrap", Delivery.AWAITED, "agent context assembly, before the prompt files are injected",
             ("workspaceDir", "bootstrapFiles"), ("cfg", "sessionKey", "sessionId", "agentId")),
    EventKey("gateway:startup", Delivery.OBSERVED, "the scheduler, once it serves (does not delay binding)",
             ("cfg", "deps", "workspaceDir")),
    EventKey("gateway:shutdown", Delivery.BOUNDED, "the scheduler on SIGTERM/SIGINT/SIGHUP, before turns drain",
             ("reason", "restartExpectedMs"), budget_ms=5000),
    EventKey("gateway:pre-restart", Delivery.BOUNDED, "the scheduler on SIGHUP (restart in place), before gateway:shutdown",
             ("reason", "restartExpectedMs"), budget_ms=10000),
    EventKey("message:received", Delivery.OBSERVED, "Scheduler.SubmitActions, once the turn is accepted (its lease taken)",
             ("from", "content", "channelId"),
             ("timestamp", "accountId", "conversationId", "messageId", "media", "originalMedia", "mediaStagingPending", "metadata")),
    EventKey("message:transcribed", Delivery.OBSERVED, "",
             ("channelId", "cfg", "transcript"), _MESSAGE_MEDIA),
    EventKey("message:preprocessed", Delivery.OBSERVED, "Scheduler.SubmitActions, after message:received (actions validated and rendered)",
             ("channelId", "cfg"), (*_MESSAGE_MEDIA, "transcript", "isGroup", "groupId")),
    EventKey("message:sent", Delivery.OBSERVED, "Scheduler.SubmitActions, when the turn's story was handed to the client (or not: success false)",
             ("to", "content", "success", "channelId"),
             ("error", "accountId", "conversationId", "messageId", "isGroup", "groupId")),
)

KEYS_BY_NAME: dict[str, EventKey] = {event.key: event for event in EVENT_KEYS}
DEFAULT_EVENT_HANDLER_TIMEOUT_MS = 5000
# A key is lowercase words joined by `:`; anything else cannot be matched or emitted.
KEY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*(:[a-z0-9][a-z0-9_.-]*)*$")


def subscription_warning(key: str) -> str | None:
    """Why a subscription will never see a kernel event (None for known keys and families)."""
    event_key = KEYS_BY_NAME.get(key)
    if event_key is not None and not event_key.fired_at:
        return f"{key} is a key of the reference this kernel refuses: nothing here produces it (docs/event-hooks.md says why)"
    if event_key is not None or key in FAMILIES:
        return None
    if key == "session:compact":
        return ("session:compact is not a family or wildcard; subscribe to session:compact:before "
                "and session:compact:after")
    family = key.split(":", 1)[0]
    if family in FAMILIES:
        known = ", ".join(event.key for event in EVENT_KEYS if event.family == family)
        return f"{key} is not an event key the kernel emits ({family} has {known}); it fires only when code emits it"
    return f"{key} is a custom key: the kernel never emits it; it fires only when code emits it"


def matches(subscription: str, key: str) -> bool:
    """An exact key, or a bare family that receives every key of the family."""
    return subscription == key or (subscription in FAMILIES and key.split(":", 1)[0] == subscription)


@dataclass
class InternalEvent:
    """What an event-key handler receives. Handlers of one emission share it and run one after
    another, so a change to `context` (agent:bootstrap's `bootstrapFiles`) reaches the next
    handler and, for awaited events, the producer."""

    key: str
    # Session id; None for gateway events.
    session_key: str | None
    context: dict[str, Any]
    timestamp: float = field(default_factory=time.time)

    @property
    def type(self) -> str:
        """The family: `command` for `command:new`."""
        return self.key.split(":", 1)[0]

    @property
    def action(self) -> str:
        """The rest of the key: `new` for `command:new`, `compact:before` for `session:compact:before`."""
        return self.key.split(":", 1)[1] if ":" in self.key else ""

"""How each proposal type is applied at commit, inside the turn's transaction.

An applier either writes (through the `ApplyContext`) or raises `Rejected` with a reason
the author can act on. New proposal types register here (`APPLIERS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store import plugin_data
from services.store.models import MessageRow
from shared.ids import new_id
from shared.structs import from_struct

STORY_METADATA_KEYS = ("segments", "cues", "yield", "presentCharacterIds")


class Rejected(Exception):
    """A proposal the store will not apply; the message is the outcome's reason."""


@dataclass
class ApplyContext:
    db: Session
    session_id: str
    turn_id: str
    now: datetime
    # The seq the next appended message gets; rolled back with its savepoint.
    next_seq: int
    appended: list[MessageRow] = field(default_factory=list)

    def append_message(self, *, role: str, text: str, plugin_id: str = "", runtime_id: str = "", meta: dict[str, Any] | None = None) -> MessageRow:
        row = MessageRow(
            id=new_id(),
            session_id=self.session_id,
            turn_id=self.turn_id,
            seq=self.next_seq,
            role=role,
            plugin_id=plugin_id,
            runtime_id=runtime_id,
            text=text,
            meta=meta or {},
            created_at=self.now,
        )
        self.db.add(row)
        self.db.flush()
        self.next_seq += 1
        self.appended.append(row)
        return row


def _story_text(payload: dict[str, Any]) -> str:
    text = payload.get("text")
    if text is not None and not isinstance(text, str):
        raise Rejected("narrative.append: payload.text must be a string")
    if text:
        return text
    segments = payload.get("segments") or []
    if not isinstance(segments, list) or not all(isinstance(item, dict) for item in segments):
        raise Rejected("narrative.append: payload.segments must be a list of objects")
    return "\n\n".join(str(item.get("text", "")) for item in segments if item.get("text"))


def apply_narrative_append(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    payload = from_struct(proposal.payload)
    text = _story_text(payload)
    if not text.strip():
        raise Rejected("narrative.append: the story is empty (give payload.text or segments with text)")
    meta = {key: payload[key] for key in STORY_METADATA_KEYS if key in payload}
    context.append_message(role="story", text=text, plugin_id=proposal.plugin_id, runtime_id=proposal.runtime_id, meta=meta)


def apply_plugin_data(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    payload = from_struct(proposal.payload)
    namespace, key = payload.get("namespace"), payload.get("key")
    if not isinstance(namespace, str) or not namespace.strip():
        raise Rejected("plugin.data: payload.namespace must be a non-empty string")
    if namespace.startswith("_"):
        raise Rejected(f"plugin.data: namespace {namespace!r} is reserved (names starting with _ belong to the kernel)")
    if len(namespace) > plugin_data.NAMESPACE_MAX:
        raise Rejected(f"plugin.data: payload.namespace is longer than {plugin_data.NAMESPACE_MAX} characters")
    if not isinstance(key, str) or not key:
        raise Rejected("plugin.data: payload.key must be a non-empty string")
    if len(key) > plugin_data.KEY_MAX:
        raise Rejected(f"plugin.data: payload.key is longer than {plugin_data.KEY_MAX} characters")
    if "value" not in payload:
        raise Rejected("plugin.data: payload.value is required (null is a value)")
    plugin_data.upsert(
        context.db,
        session_id=context.session_id,
        plugin_id=proposal.plugin_id,
        namespace=namespace,
        key=key,
        value=payload["value"],
        turn_id=context.turn_id,
        now=context.now,
    )


APPLIERS: dict[str, Callable[[ApplyContext, store_pb2.Proposal], None]] = {
    "narrative.append": apply_narrative_append,
    "plugin.data": apply_plugin_data,
}


def apply(context: ApplyContext, proposal: store_pb2.Proposal) -> None:
    applier = APPLIERS.get(proposal.type)
    if applier is None:
        raise Rejected(f"unknown proposal type {proposal.type!r}; this store applies {', '.join(sorted(APPLIERS))}")
    applier(context, proposal)

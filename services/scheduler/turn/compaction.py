"""History compaction: when the story so far would pass the prompt budget, fold the older turns
into a summary written by the session's history.compact@2 provider.

Per player turn, after TurnStart: measure the log since the latest summary; past the budget,
the turns before the last `keepTurns` player turns are foldable. PreCompaction ({messageCount},
a guard: abort keeps the history as it is) → session:compact:before → the provider →
a `history.summary` proposal that commits with the turn → PostCompaction ({compacted,
summaryId?}) → session:compact:after. This turn's prompts already read the summary.

The history.compact@2 contract: input {messages: [{seq, role, text}], previousSummary?,
targetChars, locale}; output {summary: string}. The provider plugin's session settings
`budgetChars` and `keepTurns` override the scheduler's defaults. An output may also ask for one
model call (`model`, turn/compaction_model.py): the provider is then called again with the
model's answer as `modelAnswer`, and its first summary stands when the model fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from covel.common.v1 import common_pb2
from covel.gateway.v1 import gateway_pb2_grpc
from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Package
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.hooks.payloads import PostCompaction, PreCompaction
from services.scheduler.turn.compaction_model import ask_model, model_ask
from shared.ids import new_id
from shared.logs import get_logger
from shared.structs import from_struct, from_value, to_struct

POINT = "history.compact@2"
log = get_logger(component="compaction")


@dataclass
class Compaction:
    """What a compaction did this turn: the history to read, the proposal to commit, the trace."""

    history: list[common_pb2.Message]
    proposal: store_pb2.Proposal | None = None
    trace: list[common_pb2.HookTraceEntry] = field(default_factory=list)


def provider_of(packages: Mapping[str, Package]) -> str:
    """The active plugin providing history.compact@2 (one per session: the registry lets one in; by id if ever more)."""
    providers = sorted(pid for pid, package in packages.items() if any(e.startswith(f"{POINT}/") for e in package.extensions))
    return providers[0] if providers else ""


def foldable(history: list[common_pb2.Message], keep_turns: int) -> tuple[list[common_pb2.Message], common_pb2.Message | None, int]:
    """(messages a compaction may fold, the latest summary, chars of the log since that summary)."""
    summary = next((m for m in reversed(history) if m.role == "summary"), None)
    through = int(from_struct(summary.metadata).get("throughSeq", 0)) if summary is not None else 0
    live = [m for m in history if m.role in ("player", "story") and m.seq > through]
    size = sum(len(m.text) for m in live) + (len(summary.text) if summary is not None else 0)
    players = [index for index, message in enumerate(live) if message.role == "player"]
    cut = players[-keep_turns] if keep_turns and len(players) >= keep_turns else (len(live) if not keep_turns else 0)
    return live[:cut], summary, size


def _setting(settings: dict[str, Any], name: str, default: int) -> int:
    value = settings.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


async def compact_history(
    *, hooks: HookBus, scope: ExecutionScope, packages: Mapping[str, Package], history: list[common_pb2.Message],
    budget_chars: int, keep_turns: int, gateway: Any = None,
) -> Compaction:
    """`gateway`: the LLM gateway stub a provider's model call goes to (None: no model call, the first summary stands)."""
    plugin_id = provider_of(packages)
    if not plugin_id:
        return Compaction(history)
    settings = from_struct(scope.session.plugin_settings[plugin_id]) if plugin_id in scope.session.plugin_settings else {}
    budget = _setting(settings, "budgetChars", budget_chars)
    keep = _setting(settings, "keepTurns", keep_turns)
    folded, summary, size = foldable(history, keep)
    if size <= budget or not folded:
        return Compaction(history)
    done = Compaction(history)
    pre = await hooks.dispatch(PreCompaction(len(folded)), scope)
    done.trace.extend(pre.trace)
    if pre.aborted:
        return done
    # messageCount: the entries the prompt reads in full (since the latest summary); messageCountOriginal:
    # every stored player and story entry. No token counts: this kernel measures characters.
    through = int(from_struct(summary.metadata).get("throughSeq", 0)) if summary is not None else 0
    logged = [m for m in history if m.role in ("player", "story")]
    live_count = len([m for m in logged if m.seq > through])
    events = hooks.events
    if events is not None:
        await events.compact_before(scope.session, message_count=live_count, message_count_original=len(logged))
    text, error = await _summarise(hooks, scope, plugin_id, folded, summary, budget, gateway)
    proposal = None
    if text:
        through = folded[-1].seq
        proposal = store_pb2.Proposal(
            id=new_id(), type="history.summary", plugin_id=plugin_id, payload=to_struct(
                {"text": text, "throughSeq": through, "messageCount": len(folded) + (int(from_struct(summary.metadata).get(
                    "messageCount", 0)) if summary is not None else 0)}))
        # This turn already reads the summary in place of what it folds.
        message = common_pb2.Message(id=proposal.id, session_id=scope.session.id, role="summary", plugin_id=plugin_id, text=text,
                                     metadata=to_struct({"throughSeq": through}))
        done.history = [*history, message]
        done.proposal = proposal
    else:
        log.warning("compaction.failed", session_id=scope.session.id, provider=plugin_id, reason=error)
    post = await hooks.dispatch(PostCompaction(proposal.id if proposal is not None else None), scope)
    done.trace.extend(post.trace)
    if proposal is not None and events is not None:
        # messageCount: what the prompt reads in full after the fold (before's messageCount less compactedCount).
        kept = len([m for m in logged if m.seq > folded[-1].seq])
        await events.compact_after(scope.session, message_count=kept, compacted_count=len(folded), summary_length=len(text),
                                   first_kept_entry_id=next((m.id for m in logged if m.seq > folded[-1].seq), None) or None)
    return done


async def _summarise(hooks: HookBus, scope: ExecutionScope, plugin_id: str, folded: list[common_pb2.Message],
                     summary: common_pb2.Message | None, budget: int,
                     gateway: gateway_pb2_grpc.LlmGatewayStub | None = None) -> tuple[str, str]:
    payload: dict[str, Any] = {
        "messages": [{"seq": m.seq, "role": m.role, "text": m.text} for m in folded],
        "targetChars": max(200, budget // 4),
        "locale": scope.session.locale,
    }
    if summary is not None:
        payload["previousSummary"] = summary.text
    output, error = await _ask_provider(hooks, scope, plugin_id, payload)
    text = _summary_of(output)
    if not text:
        return "", error or f"{plugin_id} returned no summary (expected {{summary: string}})"
    if gateway is None:
        return text, ""
    try:
        ask = model_ask(output)
    except ValueError as refused:
        log.warning("compaction.model_refused", session_id=scope.session.id, provider=plugin_id, why=str(refused))
        return text, ""
    if ask is None:
        return text, ""
    answer, failure = await ask_model(gateway, scope, plugin_id, ask)
    if failure:
        log.warning("compaction.model_failed", session_id=scope.session.id, provider=plugin_id, slot=ask.slot, reason=failure)
        return text, ""
    written, error = await _ask_provider(hooks, scope, plugin_id, {**payload, "modelAnswer": answer})
    modelled = _summary_of(written)
    if not modelled:
        log.warning("compaction.model_answer_refused", session_id=scope.session.id, provider=plugin_id,
                    reason=error or "no summary in the second answer")
        return text, ""
    return modelled, ""


async def _ask_provider(hooks: HookBus, scope: ExecutionScope, plugin_id: str, payload: dict[str, Any]) -> tuple[Any, str]:
    """(the provider's output, "") or (None, why it failed)."""
    answers = await hooks.call_extension(scope, POINT, payload, plugin_id=plugin_id)
    for answer in answers:
        if not answer.ok:
            return None, answer.error
        return from_value(answer.output), ""
    return None, f"{plugin_id} registers no {POINT} provider"


def _summary_of(output: Any) -> str:
    text = output.get("summary") if isinstance(output, dict) else None
    return text.strip() if isinstance(text, str) else ""

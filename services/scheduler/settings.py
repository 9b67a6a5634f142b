"""Settings of the scheduler (COVEL_ environment variables)."""

import socket
import uuid
from typing import Literal

from pydantic import Field

from shared.settings import PrincipalSettings, ServiceSettings


def _instance_id() -> str:
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"


# PrincipalSettings: who may call the client API (only the scheduler serves it).
class SchedulerSettings(PrincipalSettings, ServiceSettings):
    # Who holds a turn lease, so a stuck lease can be traced to its replica.
    scheduler_instance_id: str = Field(default_factory=_instance_id)
    # A crashed scheduler's lease lapses after this, so its sessions are playable again within it; a live
    # one renews it every third of it (and retries a failed renewal four times as often).
    scheduler_lease_ttl_ms: int = Field(default=3_000, ge=1000)
    # How long a submit waits for the session's running turn before answering ABORTED.
    scheduler_lease_wait_ms: int = 10_000
    # How often a running turn asks the store for Cancel / Interject sent to another replica (SignalTurn).
    scheduler_signal_poll_ms: int = Field(default=250, ge=1)
    # ctx.gateway: a silent first send is given up at half the time left but never sooner than this
    # (spec: 60 s), then re-sent once with the rest; with this or less left it is the only send.
    scheduler_stall_resend_min_ms: int = Field(default=60_000, ge=1)
    # A turn stream that asked for batches (SubmitActionsRequest.batch_events): how long a runtime's start or
    # finish, a hook trace entry, progress or a proposal outcome may wait to ride with the next message. Story
    # text never waits for it.
    scheduler_stream_batch_ms: int = Field(default=50, ge=0, le=10_000)
    # Upper bound of one turn, all runtimes included.
    scheduler_turn_timeout_s: float = 600.0
    # History window for story runtimes when the manifest sets none (player turns).
    scheduler_history_max_turns: int = 20
    # History compaction (a history.compact@2 provider is active): past this many characters of
    # story log since the latest summary, the turns before the last keep-turns are summarised.
    scheduler_history_budget_chars: int = Field(24_000, ge=0)
    scheduler_history_keep_turns: int = Field(4, ge=0)
    # Auto-advance: how many turns a story yielding `continue` may start in a row (a session's
    # plugin_settings["framework"].maxAutoAdvance overrides it; 0 turns it off).
    scheduler_max_auto_advance: int = 3
    # COVEL_INSTRUCTION_LOCALE: the language of every session's instructions (prompt variants: "zh"
    # reads PLUGIN.zh.md / RUNTIME.zh.md, "en" the main files), whatever the session's content
    # language; "" (default) follows each session's locale. The player still reads the content language.
    instruction_locale: Literal["", "en", "zh"] = ""
    # Detached post-turn jobs (schedule.detached): how many this replica runs at once (0: it runs
    # none; other replicas may), how often an idle worker asks the store's queue, the job lease.
    scheduler_detached_workers: int = Field(default=2, ge=0, le=64)
    scheduler_detached_poll_ms: int = Field(default=500, ge=10)
    scheduler_detached_lease_ttl_ms: int = Field(default=6_000, ge=1000)
    # SIGTERM: the whole shutdown (gateway:shutdown hooks, turns in flight and detached jobs
    # draining together, then the last RPCs) fits in this many seconds; a detached job still
    # running then goes back to the queue. Kubernetes: preStop + this < terminationGracePeriodSeconds.
    scheduler_drain_s: float = Field(default=60.0, ge=0)

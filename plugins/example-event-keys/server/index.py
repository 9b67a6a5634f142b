"""Example plugin: gateway event keys (docs/event-hooks.md).

Handlers subscribe with `covel.on_event(key, handler)` to an exact key or a whole family and
receive an `InternalEvent` (`key`, `type`, `action`, `session_key`, `context`, `timestamp`).
Event keys are not declared in PLUGIN.md: the subscription in code is what counts. The log
lines go to the hooks service's log (`.covel/logs/hooks.log` under `covel up`).

Session events reach this plugin only in sessions that enable it (`covel demo --plugin
example-event-keys`); gateway:startup and gateway:shutdown reach it whenever it is installed.
"""

from pathlib import Path

from shared.logs import get_logger

log = get_logger(component="example-event-keys")
NOTES = Path(__file__).resolve().parent.parent / "STORY-NOTES.md"


def register(covel):
    covel.on_event("command:new", on_new_session)
    # A bare family: message:received, message:preprocessed, message:sent (and the rest of the family).
    covel.on_event("message", on_message)
    covel.on_event("agent:bootstrap", add_story_notes)
    covel.on_event("gateway:startup", on_startup)
    covel.on_event("gateway:shutdown", on_shutdown, timeout_ms=2000)


def on_new_session(event):
    entry = event.context["sessionEntry"]
    log.info("example.session_created", session_id=event.session_key, locale=entry.get("locale"),
             source=event.context["commandSource"])


def on_message(event):
    if event.key == "message:received":
        log.info("example.player_said", session_id=event.session_key, content=event.context["content"])
    elif event.key == "message:sent" and not event.context["success"]:
        # A failed delivery: do not resend blindly, the client may have read part of it.
        log.warning("example.story_not_delivered", session_id=event.session_key, error=event.context.get("error"))


async def add_story_notes(event):
    # Awaited: the agent's context is assembled with whatever the handlers leave in bootstrapFiles.
    event.context["bootstrapFiles"].append(
        {"name": NOTES.name, "path": str(NOTES), "missing": not NOTES.exists(),
         **({"content": NOTES.read_text(encoding="utf-8")} if NOTES.exists() else {})}
    )


def on_startup(event):
    log.info("example.gateway_started", workspace=event.context["workspaceDir"], deps=sorted(event.context["deps"]))


async def on_shutdown(event):
    # Bounded: the scheduler waits at most 5 s for shutdown handlers; this one is quick.
    log.info("example.gateway_stopping", reason=event.context["reason"], restart_expected_ms=event.context["restartExpectedMs"])

"""The HTTP/JSON API as a table over the scheduler's client API: each route is one RPC, its request built from
the path, the query (GET) or the JSON body with protobuf's JSON mapping (camelCase names), its reply the RPC's
reply in the same mapping; a streamed RPC answers Server-Sent Events, one per TurnEvent. No business logic here:
what a call may do, and every check, is the scheduler's."""

from __future__ import annotations

import re
from dataclasses import dataclass

from covel.scheduler.v1 import scheduler_pb2


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    rpc: str
    summary: str
    # The RPC answers a stream of TurnEvents: the route answers text/event-stream.
    streamed: bool = False
    # The largest body it takes, in bytes (0: app.MAX_BODY); a file's route takes its base64.
    max_body: int = 0

    @property
    def path_fields(self) -> list[str]:
        """The request fields the path carries ({session_id} -> session_id)."""
        return re.findall(r"\{(\w+)\}", self.path)

    @property
    def request_type(self):
        return getattr(scheduler_pb2, f"{self.rpc}Request")

    @property
    def response_type(self):
        if self.streamed:
            return scheduler_pb2.TurnEvent
        return getattr(scheduler_pb2, "InvokeActionResponse" if self.rpc == "RunCommand" else f"{self.rpc}Response")


# Fields of the gRPC API the HTTP API leaves out of its description: the web front asks SubmitActions for batches
# itself and opens them, one Server-Sent Event per TurnEvent (app.py).
HIDDEN_FIELDS = {"covel.scheduler.v1.SubmitActionsRequest": ("batch_events",), "covel.scheduler.v1.TurnEvent": ("batch",)}

S = "/api/sessions/{session_id}"
# ImportWorld's file, at most 24 MiB, in base64 and JSON.
IMPORT_MAX_BODY = 33 * 1024 * 1024
ROUTES = (
    Route("GET", "/api/worlds", "ListWorlds", "The worlds a session can start in."),
    Route("GET", "/api/worlds/{world_id}", "GetWorld", "One world: opening, characters, dimensions, plugin policy."),
    Route("POST", "/api/worlds/import", "ImportWorld", "Operators: import a character card or lorebook (`file` in base64) as a world.",
          max_body=IMPORT_MAX_BODY),
    Route("GET", "/api/packs", "ListPacks", "The packs of plugins a world can pick."),
    Route("GET", "/api/worlds/{world_id}/plan", "GetPluginPlan", "What a session in the world would start with: the pack, the plugins and "
          "their cards, what is missing and why (the preparation page)."),
    Route("POST", "/api/sessions", "CreateSession", "Start a session (in a world, with plugins and settings)."),
    Route("GET", "/api/sessions", "ListSessions", "The caller's sessions, most recently active first, a page at a time."),
    Route("GET", S, "GetSession", "The session: phase, plugins, seats, setup progress."),
    Route("POST", S + "/end", "EndSession", "End the session (or delete it)."),
    Route("POST", S + "/rename", "RenameSession", "Give the session another title."),
    Route("POST", S + "/opening", "SelectOpening", "Start the story on another of its world's openings (before the first turn)."),
    Route("POST", S + "/reset", "ResetSession", "Start the session over."),
    Route("POST", S + "/actions", "SubmitActions", "Play a turn: the player's actions; the turn streams as it runs.", streamed=True),
    Route("POST", S + "/interactions/{interaction_id}", "SubmitInteraction",
          "Answer an open form, choice or confirmation; the turn it runs streams.", streamed=True),
    Route("GET", S + "/interactions", "ListInteractions", "The open interactions (with include_answered, the answered ones too)."),
    Route("POST", S + "/manual/{runtime_id}", "RunManual", "Run a manual runtime (e.g. world-init/edit-dimensions).", streamed=True),
    Route("GET", S + "/messages", "ListMessages", "The conversation log."),
    Route("GET", S + "/turns", "ListTurns", "The session's turns."),
    Route("GET", S + "/turns/{turn_id}", "GetTurn", "One turn as recorded."),
    Route("POST", S + "/watch", "WatchTurn", "Reattach to a turn's events (the running one, else the latest, or `turnId`): "
          "from its start, then live.", streamed=True),
    Route("POST", S + "/cancel", "Cancel", "Stop the running turn (and its auto-advance chain)."),
    Route("POST", S + "/interject", "Interject", "Say something while the turn runs."),
    Route("GET", S + "/plugins", "GetSessionPlugins", "The session's plugins, which run and why the others do not."),
    Route("POST", S + "/plugins", "SetSessionPlugins", "Turn plugins on or off from the next turn."),
    Route("POST", S + "/approvals", "SetPluginApprovals", "Approve or revoke community plugins."),
    Route("GET", S + "/action-kinds", "ListActionKinds", "The action kinds the session accepts, with their fields and display."),
    Route("POST", S + "/character", "SwitchCharacter", "The character a seat plays from the next turn."),
    Route("GET", S + "/panels", "ListPanels", "The plugins' UI panels with the state they draw (docs/ui.md)."),
    Route("GET", S + "/commands", "ListCommands", "The players' commands of the session's plugins."),
    Route("POST", S + "/commands", "RunCommand", "Run a command line (/name args)."),
    Route("POST", S + "/plugin-actions/{plugin_id}/{action}", "InvokeAction", "Call a running plugin's action."),
    Route("GET", S + "/lorebook", "ListLorebook", "The session's lorebook."),
    Route("GET", S + "/settlements", "ListSettlements", "Dimension settlement receipts."),
    # The story's moves (docs/api.md "Story moves").
    Route("POST", S + "/retry", "RetryTurn", "Play the last turn again as a new version (regenerate; with `replaceActions`, an edited "
          "or deleted message); the turn streams.", streamed=True),
    Route("GET", S + "/versions", "ListTurnVersions", "The versions of the last turn (or `turnId`'s), and the one chosen."),
    Route("POST", S + "/versions", "SelectTurnVersion", "Choose another version of the last turn."),
    Route("POST", S + "/rewind", "RewindSession", "Rewind to a turn: its state comes back, the later turns stay as history."),
    Route("POST", S + "/branch", "BranchSession", "A new session that starts where a turn left the story."),
    # Several players in one story (docs/api.md "Seats").
    Route("POST", S + "/seats/{seat_id}/invite", "InviteToSeat", "Invite another player to a seat: a one-time grant for the link."),
    Route("POST", "/api/seats/join", "JoinSeat", "Take the seat an invitation's grant opens."),
    Route("POST", S + "/seats/{seat_id}/revoke", "RevokeSeat", "End a seat's invitation and its guest's place."),
    Route("POST", S + "/watch-session", "WatchSession", "Every turn of the session as it is played, whoever plays it.", streamed=True),
)

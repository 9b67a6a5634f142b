"""Which contract events (and gateway event keys) each Python hookspec rides on: a plugin that
implements a hook is registered on its events (hookspec_adapter.py), and contributes.hooks declares them:

| hookspec                                               | events                          |
|--------------------------------------------------------|---------------------------------|
| before_llm_call, after_llm_call                        | PreLLMCall + PostLLMResponse    |
| run_model, run_model_stream, provide_model_options     | PreLLMCall + PostLLMResponse    |
| before_tool_call, after_tool_call                      | PreToolUse + PostToolUse        |
| system_prompt, build_prompt, build_tape_context        | PostContextAssembly             |
| provide_steering_inbox                                 | PreStep (replace.interjections) |
| continue_prompt                                        | PreStep (previous; nextPrompt)  |
| load_state                                             | TurnStart                       |
| save_state, render_outbound, dispatch_outbound,        | TurnStart + the gateway key     |
| provide_tape_sidecar, provide_tape_store (a mirror:    | message:sent (KEYS_OF_HOOK)     |
| tape_mirror.py)                                        |                                 |
| on_error                                               | PostRuntime (failed runtimes)   |
| provide_tools                                          | covel.register_tool, at load    |
| provide_channels, resolve_session                      | none: `covel channel` calls them|
| register_cli_commands                                  | none: `covel plugin` calls it   |
| onboard_config                                         | none: `covel onboard` calls it  |
| admit_message                                          | none: AdmitMessage (a submit)   |
| provide_lifespan                                       | none: entered/left with its code|
| provide_environment                                    | none: a session's first call    |
"""

from __future__ import annotations

from shared.plugin_sdk.hookspecs import HOOK_NAMES

EVENTS_OF_HOOK: dict[str, tuple[str, ...]] = {
    "before_llm_call": ("PreLLMCall", "PostLLMResponse"),
    # PostRuntime: a call that never reached PostLLMResponse (failed) is reported when its runtime ends.
    "after_llm_call": ("PreLLMCall", "PostLLMResponse", "PostRuntime"),
    "before_tool_call": ("PreToolUse", "PostToolUse"),
    "after_tool_call": ("PreToolUse", "PostToolUse"),
    "system_prompt": ("PostContextAssembly",),
    "build_prompt": ("PostContextAssembly",),
    # TurnStart: the turn's message (and load_state's state); the gateway key message:sent (KEYS_OF_HOOK): the story out.
    "load_state": ("TurnStart",),
    "save_state": ("TurnStart",),
    "render_outbound": ("TurnStart",),
    "dispatch_outbound": ("TurnStart",),
    "run_model": ("PreLLMCall", "PostLLMResponse"),
    "run_model_stream": ("PreLLMCall", "PostLLMResponse"),
    "provide_model_options": ("PreLLMCall", "PostLLMResponse"),
    "build_tape_context": ("PostContextAssembly",),
    "provide_steering_inbox": ("PreStep",),
    # PreStep's `previous`: the step before ended with status continue (the spec's StepFinished); replace.nextPrompt.
    "continue_prompt": ("PreStep",),
    # Called by the CLI, not by this service: the channel host (`covel channel`, covel_cli/channels.py) and
    # `covel plugin <plugin> <command>` (covel_cli/plugin_commands.py).
    "provide_channels": (),
    "resolve_session": (),
    "register_cli_commands": (),
    # `covel onboard` (covel_cli/onboard.py).
    "onboard_config": (),
    "provide_tape_sidecar": ("TurnStart",),
    # A mirror of each session's tape (tape_mirror.py): the store service's log stays the source of truth.
    "provide_tape_store": ("TurnStart",),
    "on_error": ("PostRuntime",),
    "provide_tools": (),
    # Rides on no event: the scheduler's submit asks it (AdmitMessage, services/hooks/admission.py) when it meets a running turn.
    "admit_message": (),
    # The hooks service enters it when the plugin's code is loaded, leaves it when that code is unloaded (lifespans.py).
    "provide_lifespan": (),
    # Asked by the process that runs the plugin's code before its first call of a session (environments.py).
    "provide_environment": (),
}
# Gateway event keys a hook also rides on (docs/event-hooks.md): after the turn's story was handed to the client.
KEYS_OF_HOOK: dict[str, tuple[str, ...]] = {
    name: ("message:sent",) for name in ("save_state", "render_outbound", "dispatch_outbound", "provide_tape_sidecar",
                                           "provide_tape_store")}
# Hooks of the spec the kernel does not call yet: implementing one fails the plugin's load, naming it
# (accepting an impl and never calling it would be silent). docs/hookspecs.md lists them.
NOT_SUPPORTED_YET: tuple[str, ...] = tuple(name for name in HOOK_NAMES if name not in EVENTS_OF_HOOK)


def events_for(hook_names: set[str]) -> list[str]:
    """The contract events a set of implemented hooks registers (what contributes.hooks must declare)."""
    return list(dict.fromkeys(event for name in HOOK_NAMES if name in hook_names for event in EVENTS_OF_HOOK.get(name, ())))

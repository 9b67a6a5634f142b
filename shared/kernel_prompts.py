"""The kernel's own user messages in an agent's conversation (not the player's words): the scheduler writes them
(services/scheduler/agent/context.py), and the offline scripted model does not read them as the player's input."""

from __future__ import annotations

# A runtime after the story (or a detached job after its turn) is told to do its task, not to continue the story.
TASK_PROMPT = "(The turn above is over. Do your task for it now.)"
# A story runtime without new player input goes on from where the story stopped.
CONTINUE_PROMPT = "(The player waits. Continue the story from where it stopped.)"
KERNEL_PROMPTS = frozenset({TASK_PROMPT, CONTINUE_PROMPT})

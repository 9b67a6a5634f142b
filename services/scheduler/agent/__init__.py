"""Agent runtimes: the model loop, its context, tools, subagents and the story stream."""

"""The turn: the runner's phases (lease, plugins, hooks, stages, commit) and the pure decisions they make."""

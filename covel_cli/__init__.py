"""The `covel` command: up, play, demo."""

"""Detached jobs: the worker that claims and runs runtimes outside the turn."""

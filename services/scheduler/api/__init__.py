"""The scheduler's public RPCs (covel.scheduler.v1.Scheduler), one module per resource; server.py composes them."""

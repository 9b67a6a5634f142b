"""The web front: an HTTP/JSON API over the scheduler's client API, and the player page (docs/web.md)."""

"""The scheduler's side of the hook contract: the bus to the hooks service, rules and event keys."""

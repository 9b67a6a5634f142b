"""The store service: sessions, the conversation log, plugin data, turn leases and the one-transaction commit of a turn."""

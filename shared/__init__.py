"""The library every service depends on: stubs, settings, gRPC helpers, plugin SDK types."""

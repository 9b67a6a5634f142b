"""The plugin registry: discovers, parses and validates plugin packages; resolves session plugin sets."""

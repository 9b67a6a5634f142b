"""The LLM gateway: model slots to providers, retries, budgets, fallbacks, streaming."""

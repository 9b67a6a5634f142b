"""Providers: one attempt at one model. Retries, budgets and fallbacks live in calls.py."""

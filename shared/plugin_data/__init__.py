"""Plugin data semantics shared by the store (commit) and the scheduler (in-execution reads): pure, stdlib only."""

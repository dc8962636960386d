"""Request-level serving simulation (issue 35)."""

"""Mutation testing of a domain's tasks (issue 28)."""

"""Test-only stand-in for ``deerflow.agents``."""

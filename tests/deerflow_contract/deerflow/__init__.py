"""Test-only stand-in for the ``deerflow`` package: just its memory backend contract."""

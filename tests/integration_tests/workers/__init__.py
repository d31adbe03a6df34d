"""Programs the multi-process integration tests start (``python -m`` from the repo root)."""

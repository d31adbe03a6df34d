"""DeerFlow PR #4885 (batch fact operations) applied: ``POST /api/memory/facts/batch`` and
``/batch-delete`` call ``batch_update_facts`` / ``batch_delete_facts``."""

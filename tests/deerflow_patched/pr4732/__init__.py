"""DeerFlow PR #4732 (query-aware turn recall) applied: DeerFlow passes each turn's message to
``get_context`` as ``query``."""

"""What the model is told before a call: the rendered ``<memory>`` block, token counting, the
ledger of what was injected, and why a fact is or is not in the block (``explain``). Whether a
remembered text may be shown at all is the instruction screen's call
(:mod:`deermem_middleware.screen`)."""

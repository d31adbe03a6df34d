"""What the model is told before a call: the rendered ``<memory>`` block, the safety screen of
remembered text, token counting, the ledger of what was injected, and why a fact is or is not in
the block (``explain``)."""

"""What the model is told before a call: the rendered ``<memory>`` block, the safety screen of
remembered text, token counting and the ledger of what was injected."""

"""DeerFlow PR #4637 (validate backends before gateway readiness) applied: a memory backend that
cannot be built stops the gateway from starting."""

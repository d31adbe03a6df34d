"""The storage conformance suite: every backend, one file per operation or capability."""

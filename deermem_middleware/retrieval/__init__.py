"""Choosing the facts worth injecting: lexical and semantic channels, the scoring, the time route
and the selector that caches indexes per memory revision."""

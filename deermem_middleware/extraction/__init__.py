"""LLM extraction: the prompt, the bounded JSON schema, tolerant parsing, the chat models
(including a local llama.cpp server) and the extractor that ties them together."""

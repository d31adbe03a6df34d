"""Keys come from the environment, never from a config file someone else can read.

DeerFlow returns its ``memory.backend_config`` to every signed-in user (``GET
/api/memory/config``, ``/api/memory/status``) after replacing each ``$VAR`` with its value, so a
key written there, literally or as ``$VAR``, is shown. ``api_key_env: OPENAI_API_KEY`` (and
``dsn_env``) names the variable instead; it is read once, at start. Errors never print a value.
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["ENV_NAME_PATTERN", "from_environment"]

ENV_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
"""What an ``*_env`` key must hold: the *name* of an environment variable (``OPENAI_API_KEY``),
never its value."""


def from_environment(data: Any, field: str) -> Any:
    """``data`` (a model's input mapping) with ``<field>_env: NAME`` replaced by ``field``: the
    value of the environment variable ``NAME``, read now (the config is read at start).

    So a key is never written in a config — DeerFlow shows its ``memory.backend_config`` to
    every signed-in user. Errors never show a value: an ``_env`` holding something that is not
    a variable's name (DeerFlow replaced a ``$VAR`` with the key itself) says so without it.
    """
    key = f"{field}_env"
    if not isinstance(data, dict) or data.get(key) is None:
        return data
    name = data[key]
    if not isinstance(name, str) or not ENV_NAME_PATTERN.match(name.strip()):
        raise ValueError(
            f"{key} must name an environment variable (e.g. OPENAI_API_KEY), not hold a value; "
            "write the name without '$' (a $VAR is replaced by its value)"
        )
    name = name.strip()
    if data.get(field) not in (None, ""):
        raise ValueError(f"give {field} or {key}, not both")
    value = os.environ.get(name, "")
    if not value.strip():
        raise ValueError(f"{key}: the environment variable {_shown_name(name)} is not set")
    return {**data, key: name, field: value}


_CONVENTIONAL_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\Z")


def _shown_name(name: str) -> str:
    """``name`` for an error when it reads as a variable's name (``OPENAI_API_KEY``); else a
    stand-in — a key of letters and digits only passes as a name, and is not printed."""
    return name if _CONVENTIONAL_ENV_NAME.match(name) else "named there"

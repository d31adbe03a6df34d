"""Prompt templates, kept as files so people can read and review them.

They live in the top-level ``prompts/`` folder of the source tree and are shipped inside the wheel
as ``deermem_middleware/prompts/``; this module finds them in either place.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from pathlib import Path

__all__ = ["load_prompt", "render_prompt"]

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@cache
def load_prompt(name: str) -> str:
    """The text of prompt ``name`` (file ``prompts/<name>.md``)."""
    filename = f"{name}.md"
    packaged = resources.files("deermem_middleware").joinpath("prompts", filename)
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    source_tree = Path(__file__).resolve().parents[2] / "prompts" / filename
    if source_tree.is_file():
        return source_tree.read_text(encoding="utf-8")
    raise FileNotFoundError(f"prompt template {filename!r} not found in the package or source tree")


def render_prompt(name: str, **values: str) -> str:
    """Fill ``{{name}}`` placeholders (JSON braces in templates need no escaping)."""
    template = load_prompt(name)
    missing = set(_PLACEHOLDER.findall(template)) - set(values)
    if missing:
        raise KeyError(f"prompt {name!r} needs values for: {', '.join(sorted(missing))}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)

"""The blocks DeerFlow's framework writes into a message, which are never the user's words.

DeerFlow's ``UploadsMiddleware`` prepends a ``<current_uploads>`` block (file names, sandbox
paths, outlines of the files) to the user's message, and its prompts carry a dozen more
framework blocks (``<system-reminder>``, ``<current_date>``, the ``<memory>`` we injected...).
Before this module only the legacy ``<uploaded_files>`` was stripped, so every turn with an
upload sent its file list into extraction and into the text facts are ranked by. Pure text in,
text out; :func:`deermem_middleware.memory.conversation.user_words` applies it.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "ORIGINAL_USER_CONTENT_KEY",
    "SERVER_BLOCK_TAGS",
    "UPLOAD_TAGS",
    "strip_server_blocks",
    "strip_uploads",
]

ORIGINAL_USER_CONTENT_KEY: Final = "original_user_content"
"""The ``additional_kwargs`` key under which DeerFlow keeps what the user typed, before its
``UploadsMiddleware`` prepends the ``<current_uploads>`` block to the message's content."""

UPLOAD_TAGS: Final = frozenset({"current_uploads", "uploaded_files"})
"""The blocks that list uploaded files: ``<current_uploads>`` (DeerFlow's ``UploadsMiddleware``)
and the legacy ``<uploaded_files>`` (older DeerFlow; still in stored threads)."""

SERVER_BLOCK_TAGS: Final = UPLOAD_TAGS | frozenset(
    {
        "system-reminder",
        "system_reminder",
        "memory",
        "current_date",
        "think",
        "analysis",
        "role",
        "soul",
        "self_update",
        "thinking_style",
        "clarification_system",
        "critical_reminders",
        "response_style",
        "citations",
        "subagent_system",
        "skill_system",
        "skill_index",
        "available_skills",
        "disabled_skills",
        "memory_tool_system",
        "todo_list_system",
        "durable_context_data",
        "slash_skill_activation",
        "mcp_routing_hints",
        "available-deferred-tools",
        "goal_continuation",
        "background_task_event",
        "file_editing_workflow",
        "guidelines",
        "output_format",
        "working_directory",
        "tool_restrictions",
    }
)
"""The blocks DeerFlow's framework writes into model input (its input sanitiser's list of
framework authority tags, ``input_sanitization_middleware._BLOCKED_TAG_NAMES`` without the
generic injection words ``system``, ``instruction``, ...). None of them is the user's words:
a file list, a date, a reminder, memory we injected ourselves — or the user forging one, which
must not become a "fact" either."""

_TAG_NAMES = "|".join(re.escape(tag) for tag in sorted(SERVER_BLOCK_TAGS, key=len, reverse=True))
_UPLOAD_NAMES = "|".join(re.escape(tag) for tag in sorted(UPLOAD_TAGS))
_TAG_END = r"(?=[\s/>])[^>]*>"
"""The rest of a tag after its name: the name must end there (``<memory_x>`` is another tag)."""
_SERVER_BLOCK = re.compile(
    rf"<\s*(?P<tag>{_TAG_NAMES}){_TAG_END}.*?<\s*/\s*(?P=tag)\s*>",
    re.DOTALL | re.IGNORECASE,
)
_OPEN_UPLOAD_BLOCK = re.compile(
    rf"<\s*(?:{_UPLOAD_NAMES}){_TAG_END}.*\Z", re.DOTALL | re.IGNORECASE
)
_STRAY_TAG = re.compile(rf"<\s*/?\s*(?:{_TAG_NAMES}){_TAG_END}", re.IGNORECASE)
_BLANK_RUN = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


def strip_server_blocks(text: str) -> str:
    """``text`` without the blocks DeerFlow's framework writes (:data:`SERVER_BLOCK_TAGS`).

    A whole ``<tag>…</tag>`` block goes with its content; an upload block left open (a message
    cut after it began) goes to the end, as everything after it is the file list; a lone
    opening or closing tag of those names goes alone, so the words around it stay.
    """
    if "<" not in text:
        return text.strip()
    text = _SERVER_BLOCK.sub("", text)
    text = _OPEN_UPLOAD_BLOCK.sub("", text)
    text = _STRAY_TAG.sub("", text)
    return _BLANK_RUN.sub("\n\n", text).strip()


def strip_uploads(text: str) -> str:
    """Remove the upload lists (``<current_uploads>``, ``<uploaded_files>``) and every other
    block DeerFlow's framework writes: :func:`strip_server_blocks`."""
    return strip_server_blocks(text)

"""Which parts of a conversation the memory may see.

Memory is built from what the *user* said and what the assistant finally *answered* — never from
tool traffic (which can be huge, private to the tool, or attacker-controlled web content), never
from uploaded file bodies, and not from pure acknowledgements ("ok", "thanks", "好的") that carry
nothing worth remembering but would still cost an extraction call.

Everything here is pure: messages in, :class:`Turn` values out.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from deermem_middleware.memory.server_blocks import (
    ORIGINAL_USER_CONTENT_KEY,
    SERVER_BLOCK_TAGS,
    UPLOAD_TAGS,
    strip_server_blocks,
    strip_uploads,
)
from deermem_middleware.memory.time import parse_timestamp

__all__ = [
    "DEFAULT_MAX_MESSAGE_CHARS",
    "ORIGINAL_USER_CONTENT_KEY",
    "SERVER_BLOCK_TAGS",
    "UPLOAD_TAGS",
    "Turn",
    "filter_messages",
    "has_enough_for_update",
    "is_trivial_ack",
    "merge_captures",
    "message_text",
    "message_time",
    "strip_server_blocks",
    "strip_uploads",
    "truncate_middle",
    "turns_after",
    "user_words",
]

DEFAULT_MAX_MESSAGE_CHARS: Final = 4000

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One message the memory may see.

    ``fingerprint`` identifies the turn across re-captures of the same thread: the message id
    when LangGraph assigned one, else a hash of role and text (stable across processes).
    ``at`` is when it was said (ISO-8601 UTC): from the message's metadata when the host records
    it, else the capture time; the extraction resolves "yesterday" against it. Not part of the
    fingerprint.
    """

    role: Role
    text: str
    fingerprint: str
    at: str | None = None

    def to_dict(self) -> dict[str, str]:
        data = {"role": self.role, "text": self.text, "fingerprint": self.fingerprint}
        if self.at:
            data["at"] = self.at
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        role = data["role"]
        if role not in ("user", "assistant"):
            raise ValueError(f"turn role must be 'user' or 'assistant', got {role!r}")
        at = data.get("at")
        return cls(
            role=role,
            text=str(data["text"]),
            fingerprint=str(data["fingerprint"]),
            at=str(at) if at else None,
        )


# Whole-message acknowledgements. Compared after casefolding and stripping punctuation/emoji.
_ACKS: Final = frozenset(
    {
        # English
        # (not "yes"/"no": those answer a question and can carry a preference)
        "ok",
        "okay",
        "k",
        "kk",
        "okey",
        "okie",
        "fine",
        "cool",
        "nice",
        "great",
        "good",
        "perfect",
        "awesome",
        "alright",
        "all right",
        "thanks",
        "thank you",
        "thx",
        "ty",
        "tks",
        "thanks a lot",
        "thank you so much",
        "thanks so much",
        "many thanks",
        "cheers",
        "got it",
        "gotcha",
        "understood",
        "noted",
        "i see",
        "makes sense",
        "sounds good",
        "ok thanks",
        "okay thanks",
        "ok thank you",
        "great thanks",
        "perfect thanks",
        "nice thanks",
        "cool thanks",
        "lol",
        "haha",
        "hmm",
        "done",
        "continue",
        "go on",
        "go ahead",
        "bye",
        "goodbye",
        "hi",
        "hello",
        "hey",
        # Chinese
        "好",
        "好的",
        "好滴",
        "好吧",
        "好呀",
        "好啊",
        "嗯",
        "嗯嗯",
        "哦",
        "噢",
        "行",
        "没问题",
        "谢谢",
        "谢谢你",
        "多谢",
        "感谢",
        "谢啦",
        "谢了",
        "收到",
        "明白",
        "明白了",
        "知道了",
        "了解",
        "懂了",
        "好的谢谢",
        "好的，谢谢",
        "ok谢谢",
        "继续",
        "再见",
        "你好",
        # Japanese / Korean, common enough to be worth skipping
        "ありがとう",
        "了解です",
        "감사합니다",
    }
)
_PUNCT_OR_SYMBOL = re.compile(r"[\W_]+", re.UNICODE)


def is_trivial_ack(text: str) -> bool:
    """True when the whole message is an acknowledgement with nothing to remember."""
    folded = unicodedata.normalize("NFKC", text).casefold().strip()
    if not folded:
        return True
    if len(folded) > 40:
        return False
    if folded in _ACKS:
        return True
    words = _PUNCT_OR_SYMBOL.sub(" ", folded).split()
    if not words:  # only punctuation / emoji, e.g. "👍" or "!!"
        return True
    return " ".join(words) in _ACKS or "".join(words) in _ACKS


_MEDIA_PLACEHOLDERS: Final = {
    "image": "[image]",
    "image_url": "[image]",
    "input_image": "[image]",
    "audio": "[audio]",
    "input_audio": "[audio]",
    "file": "[file]",
    "input_file": "[file]",
}
"""A media block's kind and what the text shows in its place (never its bytes)."""


def message_text(content: Any) -> str:
    """Plain text of a message's content, including multimodal (list-of-blocks) content.

    Text blocks are joined; images, audio and files are represented by a short placeholder so the
    extractor knows something was shared without seeing its bytes.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, Iterable):
        return str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind in ("text", "input_text", "output_text") or (kind is None and "text" in block):
                parts.append(str(block.get("text", "")))
            elif kind in _MEDIA_PLACEHOLDERS:
                parts.append(_MEDIA_PLACEHOLDERS[kind])
            # reasoning / thinking / tool_use blocks are not part of the answer
    return "\n".join(p for p in parts if p)


def user_words(content: Any, additional_kwargs: Mapping[str, Any] | None = None) -> str:
    """What the user said in a message: the text the memory learns from and ranks facts by.

    DeerFlow's ``UploadsMiddleware`` prepends a ``<current_uploads>`` block (file names, their
    sandbox paths, outlines of their contents) to the content of the message and keeps what the
    user typed in ``additional_kwargs["original_user_content"]``: that text is taken when it is
    a string (with placeholders for the images or files of the content), else the content's
    text. Either way without :func:`strip_server_blocks`' blocks.
    """
    original = (
        additional_kwargs.get(ORIGINAL_USER_CONTENT_KEY)
        if isinstance(additional_kwargs, Mapping)
        else None
    )
    if isinstance(original, str):
        media = ""
        if isinstance(content, list):
            media = message_text(
                [b for b in content if isinstance(b, dict) and b.get("type") in _MEDIA_PLACEHOLDERS]
            )
        text = "\n".join(part for part in (original, media) if part)
    else:
        text = message_text(content)
    return strip_server_blocks(text)


def truncate_middle(text: str, max_chars: int) -> str:
    """Keep the head and the tail of a long message: both usually carry the point."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    marker = f"\n…[{len(text) - max_chars} characters omitted]…\n"
    keep = max(max_chars - len(marker), 2)
    head = keep * 2 // 3
    tail = keep - head
    return text[:head].rstrip() + marker + text[len(text) - tail :].lstrip()


def _fingerprint(message: BaseMessage, role: str, text: str) -> str:
    if message.id:
        return f"id:{message.id}"
    digest = hashlib.blake2b(f"{role}\x00{text}".encode(), digest_size=12).hexdigest()
    return f"h:{digest}"


_TIME_KEYS: Final = ("timestamp", "created_at", "createdAt", "time", "sent_at", "created")


def _iso(value: Any) -> str | None:
    """An ISO-8601 string or a Unix time (seconds or milliseconds) as ``…Z`` UTC, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = float(value) / 1000.0 if value > 1e11 else float(value)
        try:
            moment = datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    elif isinstance(value, str):
        parsed = parse_timestamp(value)
        if parsed is None:
            return None
        moment = parsed
    elif isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
    else:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def message_time(message: BaseMessage) -> str | None:
    """When the message was sent, if the host recorded it in ``additional_kwargs`` or
    ``response_metadata`` (``timestamp``, ``created_at``, ``createdAt``, ``time``, ``sent_at``,
    or OpenAI's ``created``), as ISO-8601 UTC; None otherwise."""
    for metadata in (message.additional_kwargs, getattr(message, "response_metadata", None)):
        if not isinstance(metadata, dict):
            continue
        for key in _TIME_KEYS:
            if key in metadata:
                found = _iso(metadata[key])
                if found is not None:
                    return found
    return None


def _role_of(message: BaseMessage) -> Role | None:
    if isinstance(message, ToolMessage):
        return None
    if isinstance(message, HumanMessage) or message.type == "human":
        return "user"
    if isinstance(message, AIMessage) or message.type == "ai":
        tool_calls = getattr(message, "tool_calls", None) or message.additional_kwargs.get(
            "tool_calls"
        )
        return None if tool_calls else "assistant"
    return None  # system, tool, function and custom message types


def filter_messages(
    messages: Sequence[BaseMessage],
    *,
    max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS,
    now: datetime | None = None,
) -> list[Turn]:
    """The turns of a conversation the memory may see, in order.

    Keeps user messages and final assistant answers; drops tool messages and assistant messages
    that call tools; takes the user's own words (:func:`user_words`: no upload lists, no other
    block DeerFlow's framework writes); drops acknowledgements and empty user messages *together
    with the reply to them* (the reply to "thanks" is "you're welcome", not a fact).

    Each turn's ``at`` is :func:`message_time`, else ``now`` (the capture time) when given.
    """
    fallback = _iso(now) if now is not None else None
    turns: list[Turn] = []
    skip_reply = False
    for message in messages:
        role = _role_of(message)
        if role is None:
            continue
        if role == "user":
            text = user_words(message.content, message.additional_kwargs)
            skip_reply = not text or is_trivial_ack(text)
            if skip_reply:
                continue
        else:
            if skip_reply:
                # the final answer to an acknowledgement; intermediate tool-calling AI messages
                # were already dropped above, so this is the reply that closes the exchange
                skip_reply = False
                continue
            text = strip_server_blocks(message_text(message.content))
            if not text:
                continue
        fingerprint = _fingerprint(message, role, text)
        at = message_time(message) or fallback
        turns.append(Turn(role, truncate_middle(text, max_message_chars), fingerprint, at))
    return turns


def has_enough_for_update(turns: Sequence[Turn]) -> bool:
    """An update needs at least one user message and one assistant answer."""
    roles = {t.role for t in turns}
    return "user" in roles and "assistant" in roles


def turns_after(
    turns: Sequence[Turn],
    watermark: str | None,
    position: int | None = None,
    seen: Collection[str] = (),
    opening: Collection[str] = (),
) -> list[Turn]:
    """The turns of a thread's capture that were not extracted yet.

    ``watermark`` is the fingerprint of the thread's last extracted turn and ``position`` how
    many turns that capture had up to it; ``seen`` holds the thread's most recently extracted
    fingerprints and ``opening`` the first ones of that capture (both done). In order:

    1. The watermark at ``position``: the conversation was resent whole; what follows is new
       (exact even when a content hash repeats later: an answer said twice word for word).
    2. Else the newest turn already done — the watermark's last occurrence, else the last turn
       whose fingerprint is in ``seen`` or ``opening`` — and what follows it: a history trimmed
       or summarised at the front, a window that overlaps the last one or keeps the opening
       message, or an *older* capture from another worker (it ends on a done turn: nothing).
    3. Else no turn of the capture was done: all are new — a short window, or an agent without
       a checkpointer that captures only the newest message (LangGraph ids every message afresh
       on every call). A watermark stored before threads kept ``seen`` cannot tell that from an
       older capture, and falls back to length: fewer turns than ``position`` is older.

    Novelty is decided per turn, never by length, so a capture that does not grow still yields
    its new turns, and the extraction reads only those. The trade-offs: for messages without
    ids (content-hash fingerprints), a turn outside the watermark's neighbourhood whose role
    and text equal a done one is taken as done (a verbatim repetition, whose facts memory
    already holds); an older capture lagging further than ``seen`` and ``opening`` reach is
    read again after its opening (reinforcing what memory holds, never losing a turn).
    """
    if watermark is None:
        return list(turns)
    if (
        position is not None
        and 0 < position <= len(turns)
        and turns[position - 1].fingerprint == watermark
    ):
        return list(turns[position:])
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].fingerprint == watermark:
            return list(turns[index + 1 :])
    done = {*seen, *opening}
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].fingerprint in done:
            return list(turns[index + 1 :])
    if not done and position is not None and len(turns) < position:
        return []
    return list(turns)


def merge_captures(
    older: Sequence[Turn], newer: Sequence[Turn], *, limit: int
) -> tuple[tuple[Turn, ...], int]:
    """The turns of a thread's ``newer`` capture, preceded by the turns of the ``older`` one that
    it lacks (by fingerprint), at most ``limit`` in all; and how many of the oldest were cut.

    A newer capture of a thread used to *replace* the pending one, which is right when every
    capture holds the whole conversation (the newer one contains the older's turns). A thread
    whose capture does not grow — no checkpointer, each call capturing only its newest exchange,
    or a history trimmed to a short window — lost every exchange but the last of a burst within
    the debounce. Merging keeps them: with whole histories nothing is missing and the newer
    capture is returned as it is, so the extraction cost is unchanged. ``limit`` bounds what a
    long burst (or a long outage, whose retries keep merging) can accumulate.
    """
    if not older:
        return tuple(newer), 0
    known = {turn.fingerprint for turn in newer}
    missing = [turn for turn in older if turn.fingerprint not in known]
    if not missing:
        return tuple(newer), 0
    merged = (*missing, *newer)
    cut = max(0, len(merged) - limit)
    return merged[cut:], cut

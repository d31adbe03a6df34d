"""The DeerFlow backend's DeerFlow-free parts: identities, turn-start messages, the host hooks.

(The manager itself is tested against the contract model in ``test_deerflow_manager.py``,
which also checks that these modules never import DeerFlow.)
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from deermem_middleware.deerflow.backend_config import HostHooks, visible_messages
from deermem_middleware.deerflow.turns import (
    TurnMessages,
    identity,
    turn_identity,
    user_text,
)


def test_identity_defaults() -> None:
    assert identity(None, None) == ("default", None)
    assert identity("  ", "") == ("default", None)
    assert identity("alice", "coder") == ("alice", "coder")


def test_user_text_reads_only_what_the_user_said() -> None:
    assert user_text(HumanMessage("hello")) == "hello"
    assert user_text(AIMessage("hi there")) is None
    assert user_text({"role": "user", "content": "from a dict"}) == "from a dict"
    assert user_text({"role": "assistant", "content": "no"}) is None
    assert user_text("plain text") == "plain text"
    assert user_text(42) is None


def test_user_text_of_an_upload_turn_is_the_users_own_words() -> None:
    """The text ``get_context`` ranks facts by: never DeerFlow's ``<current_uploads>`` list."""
    block = (
        "<current_uploads>\n- q3.pdf (1.0 KB)\n"
        "  Path: /mnt/user-data/uploads/q3.pdf\n</current_uploads>"
    )
    said = "Which of my projects is late?"
    kept = {"original_user_content": said}
    assert user_text(HumanMessage(f"{block}\n\n{said}", additional_kwargs=kept)) == said
    assert user_text(HumanMessage(f"{block}\n\n{said}")) == said
    as_dict = {"role": "user", "content": f"{block}\n\n{said}", "additional_kwargs": kept}
    assert user_text(as_dict) == said
    assert user_text(f"{block}\n\n{said}") == said


def test_turn_identity_looks_in_keywords_context_and_config() -> None:
    assert turn_identity({"user_id": "u", "context": {"agent_name": "a"}}) == ("u", "a", None)
    config = {"configurable": {"thread_id": "t9", "user_id": "from-config"}}
    assert turn_identity({"config": config}) == ("from-config", None, "t9")


def test_turn_messages_are_bounded_and_keep_the_newest() -> None:
    turns = TurnMessages(limit=2)
    for number in range(3):
        turns.remember("u", None, f"t{number}", f"said {number}")
    assert turns.latest("u", None, "t0") is None  # the oldest thread was let go
    assert turns.latest("u", None, "t2") == "said 2"
    turns.remember("bob", None, "t2", "bob's turn")
    assert turns.latest("u", None, "t2") is None  # filed under another user
    turns.remember(None, None, None, "no thread")
    assert turns.latest("default", None, "t-unknown") == "no thread"


def test_host_hooks_backend_config_wins() -> None:
    def mine() -> None:
        return None

    def theirs() -> None:
        return None

    hooks = HostHooks.resolve({"host_llm_factory": mine}, {"host_llm_factory": theirs})
    assert hooks.llm_factory is mine and hooks.keep_hidden is None
    assert HostHooks.resolve({}, {"host_llm_factory": theirs}).llm_factory is theirs


def test_visible_messages_drop_hidden_ones_unless_kept() -> None:
    hidden = HumanMessage("reminder", additional_kwargs={"hide_from_ui": True})
    kept = HumanMessage("yes", additional_kwargs={"hide_from_ui": True, "answer": 1})
    messages = [HumanMessage("hi"), hidden, kept, {"role": "assistant", "content": "ok"}, 42]
    out = visible_messages(messages, lambda extra: "answer" in extra)
    assert [m.content for m in out] == ["hi", "yes", "ok"]

    def broken(extra: object) -> bool:
        raise RuntimeError("hook failed")

    assert [m.content for m in visible_messages([hidden], broken)] == []

"""``memory.backend_config.failure_policy``: DeerFlow's read policy, read and checked."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from deermem_middleware.config import ConfigError
from deermem_middleware.deerflow.policy import read_policy, without_policy


@pytest.mark.parametrize(
    ("backend_config", "expected"),
    [
        (None, "fail_open"),
        ({}, "fail_open"),
        ({"failure_policy": None}, "fail_open"),
        ({"failure_policy": {}}, "fail_open"),
        ({"failure_policy": {"write": "raise"}}, "fail_open"),
        ({"failure_policy": {"read": "fail_open"}}, "fail_open"),
        ({"failure_policy": {"read": "fail_closed", "write": "log_and_drop"}}, "fail_closed"),
    ],
)
def test_read_policy_is_deerflows_with_fail_open_by_default(
    backend_config: dict[str, Any] | None, expected: str
) -> None:
    assert read_policy(backend_config) == expected


@pytest.mark.parametrize(
    ("block", "where"),
    [
        ("fail_closed", r"failure_policy must be a mapping"),
        ({"read": "raise"}, r"failure_policy\.read must be one of \['fail_closed', 'fail_open'\]"),
        ({"read": True}, r"failure_policy\.read must be one of"),
        ({"write": "drop"}, r"failure_policy\.write must be one of"),
    ],
)
def test_a_wrong_policy_is_a_config_error_naming_its_key(block: Any, where: str) -> None:
    with pytest.raises(ConfigError, match=rf"memory\.backend_config\.{where}"):
        read_policy({"failure_policy": block})


def test_an_unknown_key_of_the_block_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="deermem_middleware.deerflow.policy"):
        assert read_policy({"failure_policy": {"read": "fail_closed", "reed": 1}}) == (
            "fail_closed"
        )
    assert "reed" in caplog.text and "memory.backend_config.failure_policy" in caplog.text


def test_the_block_is_taken_out_before_our_loader_reads_the_rest() -> None:
    config = {"max_facts": 50, "failure_policy": {"read": "fail_closed"}}
    assert without_policy(config) == {"max_facts": 50}
    assert config["failure_policy"] == {"read": "fail_closed"}  # the host's dict is untouched

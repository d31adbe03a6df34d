"""End-to-end tests that need a DeerFlow memory pull request applied (one folder per patch).

``tests/deerflow_patched/pr<N>/`` holds the tests of what pull request ``N`` changes for a memory
backend: they run only in the CI job that applies that patch to a copy of DeerFlow's source and
puts the patched copy in front of the installed one (``.ci/deerflow_patches.py``); the main test
run and the run against DeerFlow as it is never collect them. The fixtures are the ones of
``tests/deerflow_host`` (one DeerFlow deployment, the local LLM).
"""

from __future__ import annotations

from tests.deerflow_host.conftest import (  # noqa: F401  (fixtures, used by name)
    _deerflow_installed,
    deerflow_host,
    local_llm,
    manager_calls,
    our_middlewares,
)

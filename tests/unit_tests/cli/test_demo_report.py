"""``deermem demo``'s report when thread 2 got no ``<memory>`` block: it says why, so a run in
which the bundled 135M model wrote nothing is told apart from a wiring fault."""

from __future__ import annotations

import io

from deermem_middleware.cli.demo import DemoReport, _why_not_injected, print_report


def _report(**fields: object) -> DemoReport:
    return DemoReport(llm="local llama.cpp", memory_path="/tmp/demo.json", **fields)  # type: ignore[arg-type]


def test_an_empty_memory_is_blamed_on_the_model() -> None:
    reason = _why_not_injected(_report(), "You are a helpful assistant.")
    assert reason.startswith("the model wrote no memory from thread 1")


def test_a_stored_memory_that_was_not_injected_is_a_fault() -> None:
    report = _report(profile={"workContext": "Backend engineer in Lyon"})
    assert _why_not_injected(report, "You are a helpful assistant.") == (
        "memory was stored but not injected: see the log above"
    )


def test_no_recorded_model_call_is_said() -> None:
    assert _why_not_injected(_report(), "") == "no model call of thread 2 was recorded"


def test_the_text_report_prints_the_reason() -> None:
    report = _report(not_injected="the model wrote no memory from thread 1 (...)")
    out = io.StringIO()
    print_report(report, out)
    assert "(nothing was injected: the model wrote no memory from thread 1 (...))" in out.getvalue()


def test_the_report_states_the_selection_channel() -> None:
    report = _report(selection="lexical only (embeddings: none)")
    out = io.StringIO()
    print_report(report, out)
    assert "Fact selection: lexical only (embeddings: none)" in out.getvalue()
    assert report.to_json()["selection"] == "lexical only (embeddings: none)"

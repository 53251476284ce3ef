"""traceattr.core.progress: the runner's progress event, its line on stdout and the parser reading it back."""

from __future__ import annotations

import pytest

from traceattr.core.progress import PREFIX, Progress, emit, parse


def test_a_timing_event_round_trips_with_its_shape() -> None:
    event = Progress.timing_of("q8_ctx8k_h16_b1_bf16_p64", "2 arms × 20 calls")
    assert event.line == "[traceattr] timing q8_ctx8k_h16_b1_bf16_p64: 2 arms × 20 calls"
    assert parse(event.line) == event and event.timing == "q8_ctx8k_h16_b1_bf16_p64"


def test_other_lines() -> None:
    assert parse(PREFIX + "checking fa3") == Progress("checking fa3")  # ours, not a timing event
    assert parse("Generating '/tmp/nsys-report-1234.qdstrm'") is None  # nsys's own
    assert parse(" [traceattr] indented") is None and parse("") is None


def test_emit_writes_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    emit(Progress("warming up"))
    assert capsys.readouterr().out == "[traceattr] warming up\n"

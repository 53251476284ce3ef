"""traceattr.trace.sqlite_source: how many processes read an export."""

from __future__ import annotations

import pytest

from traceattr.trace import sqlite_source
from traceattr.trace.sqlite_source import reading_processes


def test_how_many_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACEATTR_READ_PROCESSES", raising=False)
    monkeypatch.setattr(sqlite_source, "usable_cpus", lambda: 16)
    assert reading_processes(10**7) == 8
    assert reading_processes(3 * sqlite_source.PROCESS_VALUES) == 3  # each reads long enough to pay its start
    assert reading_processes(2 * sqlite_source.PROCESS_VALUES - 1) == 0  # one would only move the reading
    monkeypatch.setattr(sqlite_source, "usable_cpus", lambda: 1)
    assert reading_processes(10**7) == 0
    monkeypatch.setenv("TRACEATTR_READ_PROCESSES", "3")
    assert reading_processes(0) == 3

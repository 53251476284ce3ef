"""traceattr.core.runfolder: the names of a run folder's files, and which round folder a path belongs to."""

from __future__ import annotations

from pathlib import Path

from traceattr.core import runfolder


def test_names() -> None:
    assert (runfolder.TRACE, runfolder.TRACE_REPORT) == ("trace.sqlite", "trace.nsys-rep")
    assert [runfolder.capture_folder(i) for i in range(3)] == ["capture-1", "capture-2", "capture-3"]


def test_a_round_folder_is_found_from_itself_a_capture_or_a_capture_s_trace(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    capture = folder / "round-1"  # a capture folder; its name does not matter here
    capture.mkdir(parents=True)
    trace = capture / runfolder.TRACE
    trace.write_bytes(b"")
    assert runfolder.round_folder_of(folder) is None  # no receipt yet: not a round folder
    (folder / f"{runfolder.RECEIPT}.json").write_text("{}")
    assert [runfolder.round_folder_of(p) for p in (folder, capture, trace)] == [folder] * 3
    assert runfolder.round_folder_of(tmp_path) is None  # the folder above is no round folder
    (capture / "deeper").mkdir()
    assert runfolder.round_folder_of(capture / "deeper" / "x.sqlite") is None  # three levels up at most


def test_a_receipt_that_is_a_folder_makes_no_round_folder(tmp_path: Path) -> None:
    (tmp_path / f"{runfolder.RECEIPT}.json").mkdir()
    assert runfolder.round_folder_of(tmp_path) is None

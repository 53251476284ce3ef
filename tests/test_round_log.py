"""A piped ``traceattr round`` log: the runner's lines, the receipt, and no progress-bar frames."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import faked_round


@pytest.mark.slow
def test_a_piped_round_log_has_no_progress_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    faked_round(tmp_path, monkeypatch)
    out, err = capsys.readouterr()
    assert "[traceattr] timing " in out  # the runner's lines are the log
    for frame in ("done", "starting nsys"):
        assert frame not in out and frame not in err, frame
    bar = re.compile(r"━\s*\d+/\d+")  # a progress bar's frame (the receipt's table is drawn with ━ too)
    assert not bar.search(out) and not bar.search(err)

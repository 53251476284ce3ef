"""A piped ``traceattr round`` log: the runner's lines, the receipt, and no progress-bar frames."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.helpers import BASE, CAND, synth_capture, timing
from traceattr.cli import main
from traceattr.core.progress import Progress


def faked_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``traceattr round`` run on CPU (each capture a synthetic trace, the candidate 10% faster): its folder."""
    import traceattr.jobs.profile as profile

    count = []

    def fake_execute(plan, on_line=None, *, report=True):  # type: ignore[no-untyped-def]
        count.append(plan)
        plan.folder.mkdir(parents=True)
        for shape in plan.run.shapes:
            on_line(Progress.timing_of(shape, f"2 arms × {plan.run.iters} calls").line)
        cap = synth_capture(plan.folder, len(count) - 1, plan.backends, timing(0.9, seed=len(count)),
                            order=plan.run.order, name="trace.sqlite")  # fmt: skip
        return profile.ProfileResult(plan.folder, cap.attribution, cap.calls, pl.DataFrame(), cap.runner, ())  # type: ignore[arg-type]

    monkeypatch.setattr(profile, "execute", fake_execute)
    monkeypatch.setattr(profile, "require_runnable", lambda plan: None)
    with pytest.raises(SystemExit) as done:
        main(["round", "--rows", "smoke", "--baseline", BASE, "--candidate", CAND, "--iters", "8",
              "--out-root", str(tmp_path)])  # fmt: skip
    assert done.value.code in (0, None)
    (folder,) = (p for p in tmp_path.iterdir() if p.is_dir())
    return folder


@pytest.mark.slow
def test_a_piped_round_log_has_no_progress_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    faked_round(tmp_path, monkeypatch)
    out, err = capsys.readouterr()
    assert "[traceattr] timing " in out  # the runner's lines are the log
    for frame in ("━", "done", "starting nsys"):
        assert frame not in out and frame not in err, frame

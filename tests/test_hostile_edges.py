"""The third hostile corpus (issue 33): output races, the terminal's edges, edited records, tiny
limits, injection. One test per class; each failed on the main of its day."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from traceattr.core.output import OutputError, ResultSet, check_file_target, write_text

EXAMPLES = Path(__file__).parent.parent / "examples"
SWEEP = EXAMPLES / "traces" / "h200_mla_sweep.sqlite"
SEARCH = EXAMPLES / "sweeps" / "h200_q8_fa3_flashmla_eager.json"


def run(*args: object, timeout: float = 60, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "traceattr", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, check=False, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


# -- ownership is checked at the swap, not only before the work ---------------------------------------


def test_a_folder_or_file_made_during_the_work_is_never_replaced(tmp_path: Path) -> None:
    frame = pl.DataFrame({"a": [1]})
    # a folder made (with the user's file in it) while the set is staged
    made = tmp_path / "made"
    with (
        pytest.raises(OutputError, match=r"appeared while .* the new result is in .*made\.new"),
        ResultSet(made, command="diff", manifest="manifest.json") as result,
    ):
        result.table(frame, "diff", "csv")
        made.mkdir()
        (made / "precious.txt").write_text("mine")
    assert os.listdir(made) == ["precious.txt"] and (made / "precious.txt").read_text() == "mine"
    assert sorted(os.listdir(tmp_path / "made.new")) == ["diff.csv"]
    # a previous set the user added a file to meanwhile
    kept = tmp_path / "kept"
    with ResultSet(kept, command="diff", manifest="manifest.json") as result:
        result.table(frame, "diff", "csv")
        result.write_manifest({})
    with (
        pytest.raises(OutputError, match="changed while"),
        ResultSet(kept, command="diff", manifest="manifest.json") as result,
    ):
        result.table(frame, "diff", "csv")
        (kept / "precious.txt").write_text("mine")
    assert (kept / "precious.txt").read_text() == "mine" and (tmp_path / "kept.new" / "diff.csv").is_file()
    # -o FILE: a file written after the check, and one changed after it
    for before in (None, "<html>traceattr</html>"):
        target = tmp_path / f"notes-{before is None}.html"
        if before is not None:
            target.write_text(before)
        check_file_target(target, [], ours=lambda _head: True)
        target.write_text("the user's notes")
        with pytest.raises(OutputError, match=r"while the result was being written.*notes-\w+\.new\.html"):
            write_text(target, "<html>report</html>")
        assert target.read_text() == "the user's notes"
        assert target.with_name(f"{target.stem}.new.html").read_text() == "<html>report</html>"
    # unchanged since the check: replaced as before
    check_file_target(target, [], ours=lambda _head: True)
    write_text(target, "<html>again</html>")
    assert target.read_text() == "<html>again</html>"


@pytest.mark.slow
def test_special_outputs_and_inputs_are_refused_before_the_work(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    cases = [
        ("report", SWEEP, "-o", fifo),
        ("compare", SWEEP, "--json", fifo),
        ("dispatch", SEARCH, "-o", fifo),
        ("attribute", SWEEP, "--rules", fifo),
        ("dispatch", SEARCH, "--ctx-dist", fifo),
        ("report", SWEEP, "-o", "/dev/null"),
    ]
    for args in cases:  # in a child process: a hang fails here instead of blocking the suite
        out = run(*args, timeout=60)
        assert out.returncode == 2, (args, out.stderr)
        assert "regular file" in out.stderr and len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)

"""present.steps: the named steps of long work on stderr, a terminal only, after a second; and in a real pty."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from rich.console import Console

from traceattr.present.steps import steps

EXAMPLE = Path(__file__).parents[1] / "examples" / "traces" / "h200_mla_sweep.sqlite"


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=80), out


@pytest.mark.slow
def test_each_step_shows_by_name_then_done() -> None:
    con, out = _terminal()
    with steps(con, after=0) as step:
        step("read run.sqlite")
        time.sleep(0.3)
        step("attribute [1] ops")  # a name is text, not markup
        time.sleep(0.3)
    drawn = out.getvalue()
    assert "read run.sqlite" in drawn and "attribute [1] ops" in drawn and "✓" in drawn
    assert " s" in drawn  # each step's seconds


@pytest.mark.slow
def test_a_step_over_traces_counts_them() -> None:
    con, out = _terminal()
    with steps(con, after=0) as step:
        advance = step.counted("attribute 3 traces", 3)
        for _ in range(2):
            advance(None)
            time.sleep(0.3)
        step("combine the traces")
        time.sleep(0.3)
    drawn = out.getvalue()
    assert "attribute 3 traces" in drawn and "2/3" in drawn and "combine the traces" in drawn


def test_nothing_when_not_a_terminal_or_quick() -> None:
    out = io.StringIO()
    with steps(Console(file=out, width=80), after=0) as step:  # a pipe or a file
        step("read run.sqlite")
        step.counted("attribute 2 traces", 2)(None)
        time.sleep(0.2)
    assert out.getvalue() == ""
    con, out = _terminal()
    with steps(con, after=5) as step:  # done before the steps would show
        step("read run.sqlite")
    assert out.getvalue() == ""


def _in_pty(args: list[str]) -> str:
    """What `traceattr ARGS` draws on a 100-column pty (stdout and stderr both the terminal), the steps shown
    from the start."""
    code = "import sys; import traceattr.present.steps as s; s.SHOW_AFTER = 0; from traceattr.cli import main; main(sys.argv[1:])"
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")} | {"TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdin=terminal, stdout=terminal, stderr=terminal,
                            env=env, close_fds=True)  # fmt: skip
    os.close(terminal)
    chunks = []
    while True:
        try:
            data = os.read(controller, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(controller)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["attribute", str(EXAMPLE)], ["read ", "attribute ", " GPU ops in ", "make the tables"]),
        (["compare", str(EXAMPLE)], ["read ", "attribute ", "analyse the calls"]),
        (["diff", str(EXAMPLE), str(EXAMPLE)], ["before: read ", "after: attribute ", "compare before and after"]),
    ],
)
def test_a_pty_shows_the_steps_and_a_pipe_does_not(args: list[str], names: list[str], tmp_path: Path) -> None:
    drawn = _in_pty(args)
    for name in names:
        assert name in drawn, (name, drawn[-2000:])
    piped = subprocess.run([sys.executable, "-m", "traceattr", *args], capture_output=True, text=True, check=True)
    assert not any(name.strip() in piped.stderr for name in names), piped.stderr
    assert "✓" not in piped.stderr and "\x1b[" not in piped.stderr


@pytest.mark.slow
def test_a_report_in_a_pty_names_its_steps(tmp_path: Path) -> None:
    drawn = _in_pty(["report", str(EXAMPLE), "-o", str(tmp_path / "r.html")])
    for name in ("read ", "analyse the calls", "draw the figures", "write r.html"):
        assert name in drawn, (name, drawn[-2000:])
    assert (tmp_path / "r.html").stat().st_size > 0


@pytest.mark.slow
def test_many_traces_in_a_pty_are_counted(tmp_path: Path) -> None:
    for name in ("a", "b"):
        shutil.copyfile(EXAMPLE, tmp_path / f"{name}.sqlite")
    drawn = _in_pty(["attribute", str(tmp_path), "-j", "1"])
    assert "attribute 2 traces" in drawn and "2/2" in drawn and "combine the traces" in drawn, drawn[-2000:]

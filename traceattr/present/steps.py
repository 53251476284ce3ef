"""The named steps of one command's long work on stderr (read, attribute, analyse, draw, write), while it runs.

A 1.25 M-kernel trace takes seconds per step (read 6 s, attribute 4 s, analyse 10 s on 2 cores); a silent
terminal would look hung. Each step shows as a line of its own: a spinner while it runs, a tick and its
seconds once done; a step over many traces also counts them (``3/8``). The lines go away when the work
ends, so the answer stands alone. Nothing is drawn when stderr is not a terminal (a piped or logged run gets
no frames), nor before the work has run :data:`SHOW_AFTER` seconds (a quick command shows nothing at all).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from traceattr.present.formats import count
from traceattr.present.names import printable

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from traceattr.trace.loader import Trace

SHOW_AFTER = 1.0  # seconds of work before the steps are drawn

Step = Callable[[str], None]  # names the step that starts now (the one before it is done)


def no_step(_name: str) -> None:
    """A :data:`Step` no one watches (a library call, a test)."""


class Steps:
    """What :func:`steps` yields: call it with a step's name when that step starts (the one before is done);
    :meth:`counted` starts a step over *total* items and returns what advances it by one. Without a terminal,
    both do nothing."""

    def __init__(self, progress: Progress | None = None) -> None:
        self._progress = progress
        self._tasks: list[tuple[TaskID, int]] = []  # each step and its total

    @property
    def drawn(self) -> bool:
        """Whether these steps may show (stderr is a terminal): output made meanwhile waits until they are gone."""
        return self._progress is not None

    def __call__(self, name: str) -> None:
        self._start(name, 1, counted=False)

    def counted(self, name: str, total: int) -> Callable[[Any], None]:
        task = self._start(name, total, counted=True)
        if task is None:
            return lambda _item: None
        progress = self._progress
        assert progress is not None
        return lambda _item: progress.advance(task)

    def _start(self, name: str, total: int, *, counted: bool) -> TaskID | None:
        if self._progress is None:
            return None
        if self._tasks:  # the step before is done, however far it counted
            self._progress.update(self._tasks[-1][0], completed=self._tasks[-1][1])
        task = self._progress.add_task(printable(name), total=total, counted=counted)
        self._tasks.append((task, total))
        return task


def _terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # closed (`>&-`), or no stream at all
        return False


def attributing(trace: Trace) -> str:
    """The attribution step's name: what it works through (``attribute 1,250,000 GPU ops in 1,000,051 ranges``)."""
    return f"attribute {count(trace.gpu_ops.height)} GPU ops in {count(trace.ranges.height)} NVTX ranges"


@contextlib.contextmanager
def steps(console: Console | None = None, *, after: float | None = None) -> Iterator[Steps]:
    """Yield the :class:`Steps` of one command's work; they show on *console* (default: stderr) if it is a
    terminal, once *after* seconds (default :data:`SHOW_AFTER`) have passed, and are cleared at the end.

    Lines the work prints meanwhile go above the steps: a terminal's stdout through the steps' console (rich
    moves them), anything else (a file, a pipe) as written."""
    if console is None and not _terminal(sys.stderr):  # rich is not even imported for a pipe or a file
        yield Steps()
        return
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn, SpinnerColumn, Task, TextColumn
    from rich.text import Text

    err = console or Console(stderr=True)
    if not err.is_terminal:
        yield Steps()
        return

    class Done(ProgressColumn):
        """A step's seconds, running then as it took; a counted step's count first."""

        def render(self, task: Task) -> Text:
            seconds = task.finished_time if task.finished else task.elapsed
            counted = f"{count(int(task.completed))}/{count(int(task.total or 0))}  " if task.fields["counted"] else ""
            return Text(f"{counted}{seconds or 0.0:.1f} s", style="progress.elapsed")

    progress = Progress(
        SpinnerColumn(finished_text="[green]✓[/]"),
        TextColumn("{task.description}", markup=False),  # a path is text, never markup
        Done(),
        console=err,
        transient=True,
        redirect_stdout=_terminal(sys.stdout),
    )
    lock = threading.Lock()
    ended = False

    def show() -> None:
        with lock:
            if not ended:
                progress.start()

    timer = threading.Timer(SHOW_AFTER if after is None else after, show)
    timer.daemon = True
    timer.start()
    try:
        yield Steps(progress)
    finally:
        timer.cancel()
        with lock:
            ended = True
            progress.stop()  # a no-op when never shown

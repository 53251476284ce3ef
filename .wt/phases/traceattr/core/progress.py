"""The runner's progress, as one typed event: its wire format (a line on the runner's stdout) and its parser.

The runner runs under nsys, so its progress reaches ``profile``, ``round`` and ``sweep`` mixed with
nsys's own output, one line at a time. A line of ours starts with :data:`PREFIX`; the rest is the
event's text, shown to the user as it is. A *timing* event (the runner starts timing a shape) also
carries the shape, which ``round`` counts as one step of its progress bar. Both directions live here,
so the format and its reading cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "[traceattr] "
_TIMING = re.compile(r"timing (\S+?):")


@dataclass(frozen=True)
class Progress:
    """One progress event: its text, and the shape it starts timing (a timing event) or None."""

    text: str
    timing: str | None = None

    @classmethod
    def timing_of(cls, shape: str, details: str) -> Progress:
        """The runner starts the timed loop of *shape* (canonical name); *details*: arms, calls, order."""
        return cls(f"timing {shape}: {details}", shape)

    @property
    def line(self) -> str:
        """The event as the runner writes it."""
        return PREFIX + self.text


def emit(event: Progress) -> None:
    """Write *event* for the parent process (flushed: it shows these lines while nsys runs)."""
    print(event.line, flush=True)


def parse(line: str) -> Progress | None:
    """The event a line of the runner's output holds; None for any other line (nsys's own)."""
    if not line.startswith(PREFIX):
        return None
    text = line.removeprefix(PREFIX)
    timing = _TIMING.match(text)
    return Progress(text, timing.group(1) if timing else None)

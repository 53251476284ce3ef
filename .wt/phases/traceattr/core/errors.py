"""Exceptions that carry a message meant for the user.

The CLI turns every :class:`TraceattrError` into one line on stderr and a
non-zero exit; anything else escaping is a bug in traceattr.
"""

from __future__ import annotations

from pathlib import Path


class TraceattrError(Exception):
    """A problem the user can act on; ``str(err)`` is the whole message."""


class TraceError(TraceattrError):
    """An input trace that cannot be read: names the file and the problem."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class NoDataError(TraceError):
    """The trace is valid but holds nothing the command could use."""


class RulesError(TraceattrError):
    """A kernel-role rules file is malformed."""


class BackendUnsupported(TraceattrError):
    """This backend cannot run this shape here; the message says why.

    A skip, not a failure: callers list the reason and carry on with other
    backends. Malformed arguments raise ``ValueError``/``TypeError`` instead.
    """


class NsysError(TraceattrError):
    """Nsight Systems is missing or one of its commands failed."""


class TraceNote(UserWarning):
    """Something the user should know that changes no number (an export written under another name)."""

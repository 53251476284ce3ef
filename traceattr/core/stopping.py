"""Stop requests: Ctrl-C, SIGTERM and SIGHUP all end a command the same clean way.

A signal becomes :class:`Stopped` (a ``KeyboardInterrupt``) in the main thread, so every cleanup
written for Ctrl-C (partial outputs removed, worker processes terminated) runs for ``kill`` and a
closed terminal too; the command then exits with 128 + the signal's number, as a shell reports it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

# SIGHUP does not exist on Windows
STOP_SIGNALS: tuple[int, ...] = tuple(
    s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)
# what a terminal sends its whole process group (Ctrl-C; a hangup when it closes): worker processes leave
# these to the command that started them, which stops them with SIGTERM
GROUP_SIGNALS: frozenset[int] = frozenset(s for s in STOP_SIGNALS if s != getattr(signal, "SIGTERM", None))
_received: list[int] = []  # the signals that stopped this process, first first


class Stopped(KeyboardInterrupt):
    """A stop request (SIGTERM, SIGHUP) raised where the program was, like Ctrl-C's KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def _raise_stop(signum: int, _frame: object) -> None:
    _received.append(signum)
    raise Stopped(signum)


def install() -> None:
    """Turn SIGTERM and SIGHUP into :class:`Stopped` in this (main) thread; a signal already ignored stays ignored.

    (``nohup`` ignores SIGHUP on purpose.) Ctrl-C keeps Python's own KeyboardInterrupt.
    """
    global _unraisable
    for signum in STOP_SIGNALS:
        if signum != signal.SIGINT and signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _raise_stop)
    if sys.unraisablehook is not _stop_kept_quiet:
        _unraisable, sys.unraisablehook = sys.unraisablehook, _stop_kept_quiet


def requested() -> bool:
    """Whether a stop signal (SIGTERM, SIGHUP) was received: the command is stopping, whatever it raises next."""
    return bool(_received)


_unraisable = sys.unraisablehook


def _stop_kept_quiet(unraisable: sys.UnraisableHookArgs) -> None:
    """A :class:`Stopped` raised where it cannot propagate (a C callback such as polars' Rust, a ``__del__``)
    is reported as unraisable and the code goes on, to fail on what the callback left: the stop is recorded
    (:func:`requested`), so no traceback is printed for it; the command's next error is read as the stop."""
    if not isinstance(unraisable.exc_value, Stopped):
        _unraisable(unraisable)


def exit_status(default: int = 130) -> int:
    """128 + the first stop signal received (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""
    return 128 + _received[0] if _received else default


def signal_name() -> str:
    """How the first stop signal is named in messages ("" for Ctrl-C or none)."""
    return signal.Signals(_received[0]).name if _received and _received[0] != signal.SIGINT else ""


def ignore_all() -> None:
    """From here on, no stop signal interrupts (the message and the exit must not turn into a traceback)."""
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold every stop signal while the body runs (cleanup, a final rename); raise the first one afterwards.

    Only the main thread receives signals; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {}
    for signum in STOP_SIGNALS:
        handler = signal.getsignal(signum)
        if handler is signal.SIG_IGN or (signum != signal.SIGINT and handler is signal.SIG_DFL):
            continue  # ignored stays ignored; a default-action signal (not a traceattr program) stays as it is
        previous[signum] = signal.signal(signum, lambda s, _frame: caught.append(s))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if caught:
        if caught[0] == signal.SIGINT:
            raise KeyboardInterrupt
        _received.append(caught[0])
        raise Stopped(caught[0])


@contextlib.contextmanager
def group_signals_held() -> Iterator[None]:
    """Block the group's signals (GROUP_SIGNALS) in this thread while worker processes start; they arrive
    here when it ends.

    A process started meanwhile begins with them blocked, and keeps them waiting until it ignores them
    (:func:`leave_group_signals`, which drops them): a Ctrl-C that lands while a worker still imports
    printed a KeyboardInterrupt traceback from that import. multiprocessing's resource tracker unblocks
    only the signals it ignores, so one started here outlives a closed terminal (killed, it made the pool's
    cleanup print 'process died unexpectedly' and a KeyError traceback per semaphore).
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, GROUP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def leave_group_signals() -> None:
    """In a worker process: ignore the group's signals (the command stops its workers), and take back the
    block it may have started with (group_signals_held); one that came meanwhile is dropped."""
    for signum in GROUP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, GROUP_SIGNALS)

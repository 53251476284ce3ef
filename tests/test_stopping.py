"""traceattr.core.stopping: SIGTERM and SIGHUP become Stopped (a KeyboardInterrupt) where the program was,
deferred() holds stops over a cleanup, and the exit status is 128 + the first stop signal's number.

Signals are raised in this process with signal.raise_signal (delivered to this, the main, thread), every
handler put back afterwards."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from traceattr.core import stopping


@pytest.fixture(autouse=True)
def handlers_restored() -> Iterator[None]:
    before = {s: signal.getsignal(s) for s in stopping.STOP_SIGNALS}
    stopping._received.clear()
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h)
        stopping._received.clear()


def test_no_stop_is_ctrl_c_s_status() -> None:
    assert stopping.exit_status() == 130 and stopping.exit_status(1) == 1 and stopping.signal_name() == ""


def test_install_turns_sigterm_into_stopped() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ctrl_c = signal.getsignal(signal.SIGINT)
    stopping.install()
    assert signal.getsignal(signal.SIGINT) is ctrl_c  # Ctrl-C keeps Python's own KeyboardInterrupt
    with pytest.raises(stopping.Stopped) as stop:
        signal.raise_signal(signal.SIGTERM)
    assert isinstance(stop.value, KeyboardInterrupt) and stop.value.signum == signal.SIGTERM
    assert (stopping.exit_status(), stopping.signal_name()) == (143, "SIGTERM")


def test_install_leaves_an_ignored_signal_ignored() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
    stopping.install()
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def test_deferred_holds_a_stop_until_the_body_is_done() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    stopping.install()
    done = []
    with pytest.raises(stopping.Stopped), stopping.deferred():
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGHUP)  # a second stop: the first one is the one raised
        done.append("cleanup")
    assert done == ["cleanup"] and stopping.exit_status() == 143
    assert signal.getsignal(signal.SIGTERM) is stopping._raise_stop  # the handlers are back


def test_deferred_ctrl_c_is_a_keyboard_interrupt_after_the_body() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    done = []
    with pytest.raises(KeyboardInterrupt) as stop, stopping.deferred():
        signal.raise_signal(signal.SIGINT)
        done.append("cleanup")
    assert done == ["cleanup"] and not isinstance(stop.value, stopping.Stopped) and stopping.exit_status() == 130


def test_ignore_all() -> None:
    stopping.ignore_all()
    assert all(signal.getsignal(s) is signal.SIG_IGN for s in stopping.STOP_SIGNALS)
    signal.raise_signal(signal.SIGTERM)  # nothing happens


def test_group_signals_are_blocked_while_held_and_unblocked_after() -> None:
    assert signal.SIGTERM not in stopping.GROUP_SIGNALS and signal.SIGINT in stopping.GROUP_SIGNALS
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with stopping.group_signals_held():
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) >= stopping.GROUP_SIGNALS
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before

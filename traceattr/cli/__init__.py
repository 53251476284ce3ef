"""The ``traceattr`` command line: thin commands over the library layers.

Each command parses, calls one library function, and prints; every
:class:`~traceattr.core.errors.TraceattrError` becomes one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import warnings
from collections.abc import Iterable


def _interrupted_while_starting(signum: int, _frame: object) -> None:
    # Ctrl-C (or SIGTERM, SIGHUP) while the libraries load: nothing is open yet, so leave at once, in one line
    os.write(2, b"traceattr: interrupted\n" if signum == signal.SIGINT else b"traceattr: stopped by a signal\n")
    os._exit(128 + signum)


# only when this process is the `traceattr` program, not a library user importing the CLI
_AS_PROGRAM = os.path.basename(sys.argv[0]) == "traceattr" or sys.argv[0].endswith(
    os.path.join("traceattr", "__main__.py")
)
if _AS_PROGRAM:
    for _signum, _default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL),
                              (getattr(signal, "SIGHUP", None), signal.SIG_DFL)):  # fmt: skip
        if _signum is not None and signal.getsignal(_signum) is _default:  # an ignored signal stays ignored
            signal.signal(_signum, _interrupted_while_starting)

import typer  # noqa: E402

from traceattr.core import stopping  # noqa: E402
from traceattr.core.errors import TraceattrError, TraceNote  # noqa: E402

try:  # typer ≥ 0.20 carries its own copy of click
    from typer._click.core import ParameterSource
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on plain click
    from click.core import ParameterSource
    from click.exceptions import NoArgsIsHelpError, UsageError

app = typer.Typer(
    name="traceattr",
    help="Where does the GPU time of an attention call go? Attribute Nsight Systems traces to NVTX ranges and kernel roles.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """Attribute GPU time in Nsight Systems traces to NVTX ranges and kernel roles."""
    if version:
        from traceattr import __version__

        print(f"traceattr {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        print(ctx.get_help())
        raise typer.Exit()


def options_given(ctx: typer.Context, names: Iterable[str], *, changed: bool = False) -> list[str]:
    """The options among *names* set on the command line, as their flags (``--shuffle-pages``).

    *changed*: only those set to something other than their default (an explicit default changes nothing).
    For a command to refuse what it would otherwise ignore, without a second list of its defaults.
    """
    params = {p.name: p for p in ctx.command.params}
    return [
        params[name].opts[0]
        for name in names
        if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)
        and not (changed and ctx.params[name] == params[name].get_default(ctx))
    ]


COMMANDS = ("attribute", "compare", "diff", "dispatch", "profile", "report", "round", "sweep")


def _register(argv: list[str] | None = None) -> None:
    """Import the command modules (for their @app.command side effect).

    Only the one being run when the command line names one: each pulls in
    what it needs (plotly, rich tables, analysis), and ``attribute --out``
    should not pay for the others' imports. Help and errors see them all.
    """
    args = sys.argv[1:] if argv is None else argv
    first = next((a for a in args if not a.startswith("-")), None)
    if first is None and "--version" in args:
        return  # the version needs no command module
    for name in [first] if first in COMMANDS else COMMANDS:
        importlib.import_module(f"traceattr.cli.{name}")


def _one_line(text: str) -> str:
    """A message as one terminal line: control characters (newlines, escapes) shown, not obeyed."""
    from traceattr.present.terminal import printable

    return printable(str(text).strip())


def _show_warning(message, category, *_args, **_kwargs) -> None:  # type: ignore[no-untyped-def]
    # one line per warning, in our words; a library's stack location means nothing to the user
    kind = "note" if issubclass(category, TraceNote) else "warning"
    print(f"traceattr: {kind}: {_one_line(str(message).strip().splitlines()[0] if str(message).strip() else '')}",
          file=sys.stderr)  # fmt: skip


def _interrupted() -> None:
    stopping.ignore_all()  # a second Ctrl-C or SIGTERM must not turn this into a traceback
    name = stopping.signal_name()
    print(f"traceattr: stopped by {name}" if name else "traceattr: interrupted", file=sys.stderr)
    sys.exit(stopping.exit_status())


def main(argv: list[str] | None = None) -> None:
    if not _AS_PROGRAM:
        _main(argv)
        return
    try:
        _main(argv)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except KeyboardInterrupt:  # a second Ctrl-C (or SIGTERM) before the first one's message
        stopping.ignore_all()
        os.write(2, b"traceattr: interrupted\n")
        code = stopping.exit_status()
    # The work is done (or refused) and every output closed: leave now, so a late Ctrl-C cannot land in
    # the interpreter's shutdown (which restores the default handler) and kill us with a signal instead.
    stopping.ignore_all()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _main(argv: list[str] | None) -> None:
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # from here on, KeyboardInterrupt as usual
    for signum in stopping.STOP_SIGNALS:
        if signum != signal.SIGINT and signal.getsignal(signum) is _interrupted_while_starting:
            signal.signal(signum, signal.SIG_DFL)
    if _AS_PROGRAM:
        stopping.install()  # SIGTERM and SIGHUP clean up as Ctrl-C does
    warnings.showwarning = _show_warning
    try:
        _register(argv)
        # standalone_mode=False: usage errors come back to us (one line, not click's box); typer turns a
        # Ctrl-C inside the command into exit code 130
        rc = app(args=argv, prog_name="traceattr", standalone_mode=False)
    except TraceattrError as err:
        print(f"traceattr: error: {_one_line(str(err))}", file=sys.stderr)
        sys.exit(2)
    except NoArgsIsHelpError as err:
        print(err.ctx.get_help() if err.ctx is not None else err.format_message())
        sys.exit(0)
    except UsageError as err:
        where = f" {err.ctx.info_name}" if err.ctx is not None and err.ctx.parent is not None else ""
        print(f"traceattr{where}: error: {_one_line(err.format_message())} (see --help)", file=sys.stderr)
        sys.exit(2)
    except (KeyboardInterrupt, typer.Abort):
        _interrupted()
    except OSError as err:  # e.g. the terminal went away; not a traceback either
        print(f"traceattr: error: {_one_line(str(err))}", file=sys.stderr)
        sys.exit(2)
    if rc == 130:
        _interrupted()
    sys.exit(rc if isinstance(rc, int) else 0)

"""The ``traceattr`` command line: thin commands over the library layers.

Each command parses, calls one library function, and prints; every
:class:`~traceattr.core.errors.TraceattrError` becomes one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import sys
import warnings
from collections.abc import Iterable
from typing import Any

# first, before typer, polars and the commands' modules load: the program's signals, allocator and GC
from traceattr.cli import process

# isort: split
import typer
from typer.core import TyperCommand, TyperGroup

from traceattr.core import stopping
from traceattr.core.errors import TraceattrError, TraceNote

try:  # typer ≥ 0.20 carries its own copy of click
    from typer._click.core import Command, Context, ParameterSource
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on plain click
    from click.core import Command, Context, ParameterSource
    from click.exceptions import NoArgsIsHelpError, UsageError

# the process set-up's parts this module uses (and tests call as cli._imports_done, cli._release_semaphores)
_AS_PROGRAM = process.AS_PROGRAM
_interrupted_while_starting = process.interrupted_while_starting
_imports_done = process.imports_done
_release_semaphores = process.release_semaphores
PIPE_CLOSED = process.PIPE_CLOSED

# Every command: its module under traceattr.cli and the first paragraph of its help, in the order
# `traceattr --help` lists them. The module is imported only when its command runs (each pulls in
# polars, the attribution, plotly or rich tables: `--help`, `--version` and `shapes` need none of
# them), and typer turns only that command's signature into options. tests/test_startup.py holds
# each summary to its command's docstring.
COMMANDS: dict[str, tuple[str, str]] = {
    "attribute": ("attribute", "Attribute GPU ops to the NVTX ranges that launched them."),
    "compare": ("compare", "The verdict first (per shape family the dispatch rule, per shape the winner and its "
                "margin), then per shape each backend's per-call time and where it goes, and fixed vs per-token "
                "cost along ctx."),
    "diff": ("diff", "Per kernel, role and NVTX range name: calls, GPU time and time per call before → after, the "
             "change split into count and per call."),
    "profile": ("profile", "Time isolated MLA decode calls of every available backend under nsys, and attribute "
                "them."),
    "shapes": ("shapes", "The shape grammar, its defaults and presets, and published row names parsed."),
    "report": ("report", "Write one self-contained HTML report: numbers, role bars, distributions, timeline, time "
               "vs context."),
    "round": ("round", "A/B a candidate arm against a baseline over a row set: per-row ratio, verdict and gates, "
              "PR-ready receipts."),
    "sweep": ("sweep", "Find where the faster of two or more arms changes along ctx: measure both ends, then "
              "bisect in log ctx."),
    "dispatch": ("dispatch", "A dispatch table per shape family (traceattr.dispatch/2): ctx breakpoints, regret, "
                 "leave-one-out, graph-safe choice."),
    "decode": ("decode", "A dispatcher against fixed arms along a grow decode trajectory, every contender replayed "
               "as a CUDA graph."),
}  # fmt: skip


class _Listed(TyperCommand):
    """A command as ``--help`` lists it (name and summary), standing in until it is run."""


class _LazyCommands(TyperGroup):
    """The root group: every command listed (help, suggestions for a typo), each built when it runs."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        for name, (_module, summary) in COMMANDS.items():
            self.commands.setdefault(name, _Listed(name, help=summary))

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if isinstance(command, _Listed) and name is not None:
            command = self.commands[name] = load_command(name)
            _imports_done()
        if command is not None:
            _plain_flag(command.get_help_option(ctx))
            # its options' values converted without pydantic (~0.15 s of every command that runs)
            from traceattr.cli.coercion import install

            install(command)
            from traceattr.cli.helpview import plain_help

            plain_help(command, ctx)  # --help in words, not Python types
        return name, command, rest

    def get_help_option(self, ctx: Context) -> Any:
        return _plain_flag(super().get_help_option(ctx))

    def format_help(self, ctx: Context, formatter: Any) -> None:
        from traceattr.cli.helpview import plain_help

        plain_help(self, ctx)  # `traceattr --help` in words too (no <bool> on --version, --verbose, --help)
        super().format_help(ctx, formatter)


def _plain_flag(option: Any) -> Any:
    """*option* (a help flag) taken as it comes: typer ≥ 0.2x coerces every value through a pydantic
    validator built on first use, and the help flag's (None unless given) would import pydantic
    (~0.13 s) for every command, `--version` included. A bool flag needs no coercion."""
    descriptor = getattr(option, "type_descriptor", None)
    if descriptor is None or descriptor.annotation is not bool or getattr(option, "_runtime_param", 0) is not None:
        return option  # older typer (no coercion layer), or already built
    from typer._coercion import PassThroughRuntimeParam

    option._runtime_param = PassThroughRuntimeParam(annotation=bool, parameter_info=descriptor.parameter_info)
    return option


def load_command(name: str) -> Command:
    """The click command *name* as typer builds it from its function (importing its module)."""
    import typer.main

    importlib.import_module(f"traceattr.cli.{COMMANDS[name][0]}")
    info = next(i for i in app.registered_commands if i.name == name)
    return typer.main.get_command_from_info(
        info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode
    )


app = typer.Typer(
    cls=_LazyCommands,
    name="traceattr",
    help="Where does the GPU time of an attention call go? Attribute Nsight Systems traces to NVTX ranges and kernel roles.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes (a redirection or a test may swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self):  # type: ignore[no-untyped-def]
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # type: ignore[no-untyped-def]
        pass


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Say on stderr how the work is done (e.g. which SQLite engine read a trace)."
    ),
) -> None:
    """Attribute GPU time in Nsight Systems traces to NVTX ranges and kernel roles."""
    # the library logs to "traceattr"; only the command line shows it, and only when asked
    log = logging.getLogger("traceattr")
    if verbose and not any(isinstance(h, _CurrentStderr) for h in log.handlers):
        handler = _CurrentStderr()
        handler.setFormatter(logging.Formatter("traceattr: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
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


def _one_line(text: str) -> str:
    """A message as one terminal line: control characters (newlines, escapes) shown, not obeyed."""
    from traceattr.present.names import printable

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


def _raised_while_stopping(err: BaseException) -> bool:
    """Whether *err* was raised while a Ctrl-C (or a stop signal) was being handled, or after a stop signal was
    received: it is that stop. CPython's ``threading.Condition.wait``, cut by the KeyboardInterrupt before it takes
    its lock back, raises "cannot release un-acquired lock" from its ``with`` block over it (a read waiting on its
    threads' futures, in CI); a SIGHUP landing in polars' Rust is swallowed there, and polars then fails on a
    TypeError of its own (compare, in CI)."""
    if stopping.requested():
        return True
    seen: set[int] = set()
    cause = err.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__context__
    return False


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
        name = stopping.signal_name()
        os.write(2, f"traceattr: stopped by {name}\n".encode() if name else b"traceattr: interrupted\n")
        code = stopping.exit_status()
    except BrokenPipeError:  # the reader of stdout went away (`| head -1`) before the answer was all written
        code = PIPE_CLOSED
    # The work is done (or refused) and every output closed: leave now, so a late Ctrl-C cannot land in
    # the interpreter's shutdown (which restores the default handler) and kill us with a signal instead.
    stopping.ignore_all()
    _release_semaphores()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = PIPE_CLOSED if code == 0 else code
    except (OSError, ValueError):
        pass
    if process.answer_lost() and code == 0:  # started with stdout closed (`>&-`): the answer went nowhere
        with contextlib.suppress(OSError, ValueError):
            print("traceattr: standard output is closed; the answer was not written", file=sys.stderr)
        code = PIPE_CLOSED
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)


def _main(argv: list[str] | None) -> None:
    try:
        _run(argv)
    finally:  # --verbose lasts one command: a library user calling main() again is not left logging
        log = logging.getLogger("traceattr")
        for handler in [h for h in log.handlers if isinstance(h, _CurrentStderr)]:
            log.removeHandler(handler)
            log.setLevel(logging.NOTSET)


def _run(argv: list[str] | None) -> None:
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # from here on, KeyboardInterrupt as usual
    for signum in stopping.STOP_SIGNALS:
        if signum != signal.SIGINT and signal.getsignal(signum) is _interrupted_while_starting:
            signal.signal(signum, signal.SIG_DFL)
    if _AS_PROGRAM:
        stopping.install()  # SIGTERM and SIGHUP clean up as Ctrl-C does
    warnings.showwarning = _show_warning
    try:
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
    except BrokenPipeError:
        raise
    except (OSError, MemoryError) as err:
        limit = process.limit_reached(err)
        if limit is not None:
            print(f"traceattr: error: {limit}", file=sys.stderr)
            sys.exit(2)
        if isinstance(err, MemoryError):
            raise
        # e.g. the terminal went away; not a traceback either
        print(f"traceattr: error: {_one_line(str(err))}", file=sys.stderr)
        sys.exit(2)
    except BaseException as err:  # a library's panic (pyo3's PanicException is no Exception)
        if _raised_while_stopping(err):
            _interrupted()
        limit = process.limit_reached(err)
        if limit is None:
            raise
        print(f"traceattr: error: {limit}", file=sys.stderr)
        sys.exit(2)
    if rc == 130:
        _interrupted()
    sys.exit(rc if isinstance(rc, int) else 0)

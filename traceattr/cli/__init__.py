"""The ``traceattr`` command line: thin commands over the library layers.

Each command parses, calls one library function, and prints; every
:class:`~traceattr.errors.TraceattrError` becomes one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import typer

from traceattr.errors import TraceattrError

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


COMMANDS = ("attribute", "compare", "diff", "profile", "report", "round")


def _register(argv: list[str] | None = None) -> None:
    """Import the command modules (for their @app.command side effect).

    Only the one being run when the command line names one: each pulls in
    what it needs (plotly, rich tables, analysis), and ``attribute --out``
    should not pay for the others' imports. Help and errors see them all.
    """
    args = sys.argv[1:] if argv is None else argv
    first = next((a for a in args if not a.startswith("-")), None)
    for name in [first] if first in COMMANDS else COMMANDS:
        importlib.import_module(f"traceattr.cli.{name}")


def main(argv: list[str] | None = None) -> None:
    _register(argv)
    try:
        app(args=argv, prog_name="traceattr")
    except TraceattrError as err:
        print(f"traceattr: error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("traceattr: interrupted", file=sys.stderr)
        sys.exit(130)

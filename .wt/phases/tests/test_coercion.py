"""The quick coercion of option values (traceattr.cli.coercion) gives what typer's own (pydantic) gives:
the same value of the same type, or the same error, for every option of every command."""

from __future__ import annotations

import subprocess
import sys
from enum import Enum
from typing import Any

import pytest

from traceattr.cli import COMMANDS, load_command
from traceattr.cli.coercion import converter, install

pytest.importorskip("typer._coercion")
from typer._click.core import Context
from typer._coercion import build_runtime_param

STRINGS = ["x", "", " a ", "é", "-", "1", "a\nb", "TABLE", "~", "."]
INTS = ["0", "5", "-1", "+5", "007", "-0", " 5", "5 ", "1_000", "1.0", "1.5", "abc", "", "2147483648",
        "2147483649", "99999999999999999999", "٣", 0, 1, 30, -3, 2.0, True]  # fmt: skip
FLOATS = ["0", "1.5", "-2.5e3", ".5", "5.", "1e400", "inf", "nan", "-inf", "abc", "", "1_0", "1e", "+.5e-3",
          "0x10", 1, 2.5, 0, True, float("inf")]  # fmt: skip
PATHS = ["x", "", ".", "/nonexistent/y", "~", "-", "a b", "/tmp"]


def _samples(param: Any) -> list[Any]:
    annotation = param.type_descriptor.annotation
    values: list[Any] = [param.default, None]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        values += [m.value for m in annotation] + [m.value.upper() for m in annotation] + list(annotation)
        values += ["bogus", ""]
    elif annotation is int:
        values += INTS
    elif annotation is float:
        values += FLOATS
    elif annotation is bool:
        values += [True, False]
    else:
        values += PATHS + STRINGS
    if getattr(annotation, "__origin__", None) is list:
        values = [[], ["a", "b"], "a", ("x", ""), [""], None]
    return values


def _outcome(run: Any) -> tuple[str, Any]:
    try:
        value = run()
    except Exception as err:  # the error is what is compared
        message = err.format_message() if hasattr(err, "format_message") else str(err)
        return f"error {type(err).__name__}", message
    shape = [type(v) for v in value] if isinstance(value, list) else type(value)
    return repr(shape), repr(value)  # repr: nan equals itself


@pytest.mark.parametrize("name", list(COMMANDS))
def test_quick_coercion_gives_what_typer_gives(name: str) -> None:
    command = load_command(name)
    ctx = Context(command, info_name=name)
    quick_count = 0
    for param in command.params:
        descriptor = param.type_descriptor
        if converter(descriptor.annotation, descriptor.parameter_info, descriptor.file_annotation) is None:
            continue
        quick_count += 1
        param._runtime_param = None
        install(type("C", (), {"params": [param]}))
        quick = param._runtime_param
        slow = build_runtime_param(descriptor)
        for value in _samples(param):
            got = _outcome(lambda: quick.coerce(value, param=param, ctx=ctx))  # noqa: B023
            want = _outcome(lambda: slow.coerce(value, param=param, ctx=ctx))  # noqa: B023
            assert got == want, (name, param.name, value)
    assert quick_count == len(command.params), "every option of our commands has a quick coercion"


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("attribute", "/nonexistent.sqlite", "--limit", "5", "-f", "csv", "--mode", "nsys"),
        ("diff", "/nonexistent/a", "/nonexistent/b"),
    ],
)
def test_a_command_that_runs_imports_no_pydantic(args: tuple[str, ...]) -> None:
    """The values are coerced without pydantic (the command itself then fails on the missing file)."""
    probe = (
        "import contextlib, io, sys\n"
        f"sys.argv = ['traceattr', *{list(args)!r}]\n"
        "from traceattr.cli import _main\n"
        "with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    _main(None)\n"
        "print('pydantic' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr

"""``--fail-on``: the CI gate's option and its exit status, shared by the commands that decide."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from traceattr.analysis.decision import Decision
from traceattr.analysis.fail_on import CONDITIONS, failures, parse_conditions
from traceattr.present.names import printable

# The answer was written, and the decision meets a --fail-on condition: a status of its own, so CI tells it from
# a bug (1) and from refused input (2). README: exit status.
DECISION_FAILS = 3

FailOnOpt = Annotated[
    list[str],
    typer.Option(
        "--fail-on",
        help="Exit with status 3 (after printing the answer) when the decision meets this condition; repeatable. "
        + "; ".join(f"{k}: {v}" for k, v in CONDITIONS.items())
        + ".",
    ),
]


def check_fail_on(texts: list[str]) -> None:
    """Refuse a bad condition before the work (one line, exit 2)."""
    parse_conditions(texts)


def gate(decision: Decision | None, texts: list[str]) -> None:
    """Print each condition met (stderr) and exit with :data:`DECISION_FAILS`; return when none is."""
    if not texts or decision is None:
        return
    met = failures(decision, parse_conditions(texts))
    err = Console(stderr=True)
    for line in met:
        err.print(Text.assemble(("fail:", "red"), f" {printable(line)}"), soft_wrap=True)
    if met:
        raise typer.Exit(DECISION_FAILS)

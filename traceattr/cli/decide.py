"""The options of the commands that decide: ``--time`` (what a call's time is) and ``--fail-on`` (a CI gate,
with its exit status), each defined once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from traceattr.analysis.decision import Decision
from traceattr.analysis.fail_on import CONDITIONS, DIFF_CONDITIONS, failures, parse_conditions
from traceattr.present.names import printable

# The answer was written, and the decision meets a --fail-on condition: a status of its own, so CI tells it from
# a bug (1) and from refused input (2). docs/files.md: exit status.
DECISION_FAILS = 3


def fail_on_option(conditions: Mapping[str, str]) -> Any:
    """The ``--fail-on`` option of a command whose conditions are *conditions* (word -> what it fails on)."""
    words = "; ".join(f"{k}: {v}" for k, v in conditions.items())
    help_text = f"Exit with status 3 (after printing the answer) when this condition is met; repeatable. {words}."
    return Annotated[list[str], typer.Option("--fail-on", help=help_text)]


FailOnOpt = fail_on_option(CONDITIONS)
DiffFailOnOpt = fail_on_option(DIFF_CONDITIONS)


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

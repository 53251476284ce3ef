"""The library facade: one object per trace, forwarding to the layers."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import polars as pl

from traceattr.attribution.engine import Attribution, Mode, RangeFilter, attribute
from traceattr.attribution.roles import RoleRules
from traceattr.trace.inputs import resolve_trace
from traceattr.trace.loader import Trace, load_trace


class Session:
    """A trace opened for analysis. Construction reads nothing."""

    def __init__(self, path: str | Path, engine: str = "auto") -> None:
        self.path = Path(path)
        self.engine = engine

    @cached_property
    def trace(self) -> Trace:
        return load_trace(resolve_trace(self.path), self.engine)

    def attribute(
        self,
        mode: Mode = "nsys",
        *,
        rules: str | Path | RoleRules | None = None,
        domain: str | None = None,
        match: str | None = None,
    ) -> Attribution:
        """GPU ops per NVTX range and kernel role; see :func:`traceattr.attribution.engine.attribute`."""
        role_rules = rules if isinstance(rules, RoleRules) else RoleRules.load(rules)
        return attribute(self.trace, mode=mode, rules=role_rules, select=RangeFilter(domain, match))

    def calls(self, group: str | None = None, **select: str | None) -> pl.DataFrame:
        """One row per measured call (:func:`traceattr.analysis.calls.calls`); *group*: a preset name or a
        regex with named groups backend, shape (iter, arm optional); *select*: domain=, match= as attribute."""
        from traceattr.analysis.calls import calls

        return calls(self.attribute(**select), group)  # type: ignore[arg-type]


def open(path: str | Path, engine: str = "auto") -> Session:
    return Session(path, engine)

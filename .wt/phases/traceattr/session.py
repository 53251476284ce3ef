"""The library facade: one object per trace, forwarding to the layers."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from traceattr.attribution.engine import Attribution, Mode, RangeFilter, attribute
from traceattr.attribution.roles import RoleRules
from traceattr.trace.inputs import resolve_trace
from traceattr.trace.loader import Trace, load_trace

if TYPE_CHECKING:
    from traceattr.analysis.decision import Decision
    from traceattr.analysis.pipeline import Analysis


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

    def analyse(
        self,
        group: str | None = None,
        *,
        bandwidth_tb_s: float | None = None,
        rules: str | Path | RoleRules | None = None,
        domain: str | None = None,
        match: str | None = None,
        basis: str = "span",
    ) -> Analysis:
        """Every analysis ``traceattr compare`` prints and writes (:func:`traceattr.analysis.pipeline.analyse`):
        calls, summary, the decision, crossovers, fit; with a run folder's CUDA-event times where one is beside;
        *basis*: what a call's time is (``span``, ``work``, ``attention``, ``events``: ``--time``)."""
        from traceattr.analysis.pipeline import analyse
        from traceattr.backends.arms import same_program
        from traceattr.core.records import runner_events

        att = self.attribute(rules=rules, domain=domain, match=match)
        peak = bandwidth_tb_s * 1e12 if bandwidth_tb_s else None
        events = runner_events(self.path)
        return analyse(att, peak_bytes_per_s=peak, events=events, group=group, same_program=same_program,
                       source=str(self.path), basis=basis)  # fmt: skip

    def decide(self, group: str | None = None, **options: Any) -> Decision:
        """The decision ``compare`` prints, ``--json`` writes and ``report`` shows, as one record
        (:class:`traceattr.analysis.decision.Decision`; ``.to_json()`` for CI). *options* as :meth:`analyse`."""
        decision = self.analyse(group, **options).decision
        assert decision is not None  # analyse always decides
        return decision


def open(path: str | Path, engine: str = "auto") -> Session:
    return Session(path, engine)

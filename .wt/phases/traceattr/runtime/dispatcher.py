"""The per-step dispatcher: choose an arm from the batch's seq_lens, update its static buffers, replay it.

``step(seq_lens)`` = :meth:`Dispatcher.prepare` (choose + re-plan, host only) then :meth:`Dispatcher.launch`
(replay, asynchronous). A decode loop with N attention layers per step calls ``prepare`` once and
``launch`` N times: every layer of a step reads the same seq_lens, so one plan serves them all (each
layer's query and cache pointers would be its own captured graph; the metadata buffers are shared).
Calling ``prepare`` for step k+1 right after enqueueing step k's launches overlaps the re-plan with
step k's GPU work (the arms guard their staging buffers, :mod:`traceattr.runtime.graphs`).

The choice is pure Python on host data (:meth:`Dispatcher.choose`: a rule, then a bisect over the
table's boundaries); nothing here imports torch, so it is tested with fake arms on any machine.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from traceattr.core.errors import TraceattrError
from traceattr.runtime.select import Rule, key_ctx
from traceattr.runtime.table import DispatchTable, FamilyKey, FamilyTable, Mode


class GraphArm(Protocol):
    """What the dispatcher drives: ``update`` writes a step's metadata (host), ``replay`` launches (async)."""

    label: str

    def update(self, seq_lens: Sequence[int]) -> None: ...

    def replay(self) -> Any: ...


class TableModeRefused(TraceattrError):
    """A table measured in one mode loaded for another (an eager table into CUDA graphs) without consent.

    The eager crossover of a family can vanish under graph replay (H200 q8 h16: 138k–153k eager, an
    undecided band at 153k with graphs); shipping an eager table inside graphs costs what
    ``traceattr dispatch`` shows as its regret under graphs.
    """


@dataclass
class HostTimes:
    """Host nanoseconds per step, split as the issue asks: choosing, re-planning, launching."""

    choose_ns: list[int] = field(default_factory=list)
    replan_ns: list[int] = field(default_factory=list)
    launch_ns: list[int] = field(default_factory=list)


class Dispatcher:
    """Arms by label (each one captured graph for this batch size) and the family table that picks among them."""

    def __init__(self, table: FamilyTable, arms: Mapping[str, GraphArm], *, rule: Rule = "max",
                 record: bool = True) -> None:  # fmt: skip
        """*record*: keep each step's choice and host times (``chosen``, ``times``; one entry per step, for
        measuring). A serving loop passes ``record=False``: nothing then grows with the steps served, and
        ``switches`` still counts."""
        missing = [a for a in table.arms if a not in arms]
        if missing:
            raise TraceattrError(f"table {table.family} picks {', '.join(missing)}, which the dispatcher was not given")
        key_ctx([1], rule)  # an unknown rule fails here, not on the first step
        self.table, self.rule = table, rule
        self.arms = {a: arms[a] for a in table.arms}  # only what the table can pick: one graph each
        self._bounds = table.bounds
        self._labels = tuple(s.arm for s in table.segments)
        self.current: str | None = None
        self.record = record
        self.chosen: list[str] = []
        self.times = HostTimes()
        self.switches = 0

    @property
    def graphs(self) -> int:
        return len(self.arms)

    def choose(self, seq_lens: Sequence[int]) -> str:
        """The arm for this batch: the table's segment holding the rule's ctx."""
        return self._labels[bisect.bisect_right(self._bounds, key_ctx(seq_lens, self.rule))]

    def prepare(self, seq_lens: Sequence[int]) -> str:
        """Choose and write the step's metadata into the chosen arm's static buffers (host); the arm's label."""
        t0 = time.perf_counter_ns()
        label = self.choose(seq_lens)
        t1 = time.perf_counter_ns()
        self.arms[label].update(seq_lens)
        t2 = time.perf_counter_ns()
        if self.current is not None and label != self.current:
            self.switches += 1
        self.current = label
        if self.record:
            self.times.choose_ns.append(t1 - t0)
            self.times.replan_ns.append(t2 - t1)
            self.chosen.append(label)
        return label

    def launch(self, layers: int = 1) -> Any:
        """Replay the prepared arm *layers* times (one plan, N replays); its output buffer."""
        if self.current is None:
            raise TraceattrError("launch() before prepare(): no step's metadata has been written")
        arm = self.arms[self.current]
        t0 = time.perf_counter_ns()
        out = None
        for _ in range(layers):
            out = arm.replay()
        if self.record:
            self.times.launch_ns.append(time.perf_counter_ns() - t0)
        return out

    def step(self, seq_lens: Sequence[int], layers: int = 1) -> Any:
        """One decode step: prepare, then launch; the chosen arm's output (written asynchronously)."""
        self.prepare(seq_lens)
        return self.launch(layers)


class ByQuery:
    """One dispatcher per query length, for steps whose q varies (each q has its own graphs: q fixes the
    captured launch shape). A step is ``(q, seq_len, ...)``; the interface is :class:`Dispatcher`'s."""

    def __init__(self, by_q: Mapping[int, Dispatcher]) -> None:
        self.by_q = dict(by_q)
        self._last: Dispatcher | None = None
        self.current: str | None = None
        self.chosen: list[str] = []
        self.times = HostTimes()

    @property
    def graphs(self) -> int:
        return sum(d.graphs for d in self.by_q.values())

    @property
    def arms(self) -> Mapping[str, GraphArm]:
        """The arms of the q last prepared (what :meth:`launch` replays)."""
        if self._last is None:
            raise TraceattrError("no step prepared yet")
        return self._last.arms

    def _for(self, step: Sequence[int]) -> tuple[Dispatcher, Sequence[int]]:
        q, lens = step[0], step[1:]
        if q not in self.by_q:
            raise TraceattrError(f"a step with q={q}: this dispatcher serves q in {sorted(self.by_q)}")
        return self.by_q[q], lens

    def choose(self, step: Sequence[int]) -> str:
        d, lens = self._for(step)
        return d.choose(lens)

    def prepare(self, step: Sequence[int]) -> str:
        d, lens = self._for(step)
        label = d.prepare(lens)
        self._last, self.current = d, label
        self.chosen.append(label)
        if d.record:
            self.times.choose_ns.append(d.times.choose_ns[-1])
            self.times.replan_ns.append(d.times.replan_ns[-1])
        return label

    def launch(self, layers: int = 1) -> Any:
        if self._last is None:
            raise TraceattrError("launch() before prepare(): no step's metadata has been written")
        out = self._last.launch(layers)
        if self._last.record:
            self.times.launch_ns.append(self._last.times.launch_ns[-1])
        return out


def family_for(
    table: DispatchTable, key: FamilyKey, *, mode: Mode = "graphs", allow_other_mode: bool = False
) -> FamilyTable:
    """The table's family for *key*, refusing a table measured in another mode unless *allow_other_mode*.

    A table whose mode is ``unknown`` loads (the document does not say; :func:`parse_table`'s ``mode=``
    states it when known from elsewhere).
    """
    if table.mode not in ("unknown", mode) and not allow_other_mode:
        raise TableModeRefused(
            f"{table.source or 'the table'} was measured {table.mode}, the dispatcher runs {mode}: a crossover "
            f"measured {table.mode} need not hold under {mode} (pass allow_other_mode=True to load it anyway)"
        )
    return table.get(key)

"""The measuring protocol and the gates of a comparison, as two frozen, versioned records.

:class:`Protocol` is how the calls are timed (how many, what runs between them, the hold, the
lead, graphs, the order); :class:`Gates` is when a comparison row is refused. Each default is
written here once. The commands differ in a few defaults (``profile`` samples a fixed number of
rounds and does not hold the GPU; ``round`` and ``sweep`` add iterations until the medians are
precise and hold the GPU): :data:`PRESETS` names them, and the command-line options of
``profile``, ``round`` and ``sweep`` are made from these records (:mod:`traceattr.cli.options`).

``to_json``/``from_json`` write and read the record's own form (``schema`` ``traceattr.protocol/1``
and ``traceattr.gates/1``); ``from_json`` also reads the protocol as older files hold it (a
receipt's or a sweep's header: ``hold`` as a flag or only ``hold_us``, no ``lead``, the order
in words), so every receipt, plan and sweep record written before still reads. A value of the
wrong type or out of range is one :class:`~traceattr.core.errors.TraceError` line naming the
file, the field and the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from traceattr.core.fields import (
    Invalid,
    _bool,
    _check_schema,
    _field,
    _int,
    _not_null,
    _number,
    _object,
    _reading,
    _str,
)
from traceattr.core.precision import CONFIDENCE

PROTOCOL_FORMAT = "traceattr.protocol/1"
GATES_FORMAT = "traceattr.gates/1"

MAX_ITERS = 1_000_000  # timed iterations per capture a plan may ask for
MAX_HOLD_US = 10_000.0  # --hold-us: a hold is on or off; the bound keeps old spin lengths sane
# what "hold on" is written as (hold_us): any value > 0 switches the host-released hold on, the host sets its length
HOLD_ON_US = 100.0
ORDERS: tuple[str, ...] = ("abba", "blocked")
CAPTURES = 3  # captures in a round (arm order alternating between them), unless --captures says otherwise
# with max_noise and no max_iters, the runner's cap: ~500 × (flush + call) per arm stays under a second at 900k
DEFAULT_MAX_ITERS = 500


@dataclass(frozen=True)
class Protocol:
    """How one capture times its calls (the runner's :class:`~traceattr.core.records.RunPlan` carries it)."""

    iters: int = 20  # ABBA iterations: every arm runs once per iteration; the minimum when max_noise is set
    warmup: int = 3  # untimed calls per arm after validation (the first also JIT-compiles)
    max_noise: float | None = None  # add iterations until every arm's median is this precise (fraction); None: off
    max_iters: int | None = None  # ... but never more iterations than this (None: the runner's cap)
    # > 0: before each group the GPU spins until the host has enqueued the group and releases it (runner.hold),
    # so no call waits for its own launch; the number no longer sets a length (kept so plans and --hold-us read)
    hold_us: float = 0.0
    # each group starts with an untimed call of its last arm (after the hold): the first call after an idle GPU
    # ran 0.4–3.1% faster than the next on the H200, which read as a position effect in every ABBA pair
    lead: bool = True
    between: str = "flush"  # before every timed call: "flush", "flush+ARM" (flush, then ARM's call) or "none"
    flush_bytes: int | None = None  # the L2 flush buffer; None: 2× the GPU's L2, at least 128 MiB
    graphs: bool = False  # replay every arm's call as a captured CUDA graph
    seed: int = 0  # of the random inputs (and the page shuffle)
    order: str = "abba"  # "abba": arms interleaved, reversed on odd iterations; "blocked": each arm back to back
    sensitivity: bool = False  # a round also times each row back to back, to show how far the ratio moves

    @property
    def hold(self) -> bool:
        """Whether the host-released hold is on."""
        return self.hold_us > 0

    def held(self, on: bool) -> Protocol:
        """This protocol with the hold switched on (written as :data:`HOLD_ON_US`) or off."""
        return replace(self, hold_us=HOLD_ON_US if on else 0.0)

    def to_json(self) -> dict[str, Any]:
        return {"schema": PROTOCOL_FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, content: Mapping[str, Any] | None, path: Path | str = "protocol") -> Protocol:
        """The record's own form, or a protocol as a receipt's or a sweep's header holds it (older ones too)."""
        return _reading(path, "protocol", lambda: _protocol(content or {}, ""))


def _protocol(p: Mapping[str, Any], at: str) -> Protocol:
    """Absent fields read as the defaults, except what older files did not do: no ``lead`` (leads did not
    run yet), and a hold that was only a spin length (``hold_us`` > 0 is on)."""
    _check_schema(p, PROTOCOL_FORMAT)
    d = Protocol()
    iters = _field(p, "iters", _int(1, MAX_ITERS), at, d.iters)
    _not_null(p, ("iters", "warmup", "hold", "hold_us", "lead", "between", "graphs", "seed", "sensitivity"), at)
    hold_us = _field(p, "hold_us", _number(0, MAX_HOLD_US), at, d.hold_us)
    if "hold" in p:
        hold_us = HOLD_ON_US if _field(p, "hold", _bool, at) else 0.0
    order = _field(p, "order", _str, at, d.order)
    return Protocol(
        iters=iters,
        warmup=_field(p, "warmup", _int(0, MAX_ITERS), at, d.warmup),
        max_noise=_field(p, "max_noise", _number(0, 1, open_low=True, open_high=True), at, None),
        max_iters=_field(p, "max_iters", _int(iters, MAX_ITERS), at, None),
        hold_us=hold_us,
        lead=_field(p, "lead", _bool, at, False),  # written before leads: none ran
        between=_field(p, "between", _str, at, d.between),
        flush_bytes=_field(p, "flush_bytes", _int(1, 1 << 40), at, None),
        graphs=_field(p, "graphs", _bool, at, d.graphs),
        seed=_field(p, "seed", _int(), at, d.seed),
        # a sweep's header says the order in words ("abba, arm order alternating between steps")
        order=next((o for o in ORDERS if order.startswith(o)), order),
        sensitivity=_field(p, "sensitivity", _bool, at, d.sensitivity),
    )


# ±1%: below this a difference is noise for a kernel-level decision (every verdict's tie: analysis.stats.classify)
SAME_WITHIN = 0.01


@dataclass(frozen=True)
class Gates:
    """Thresholds of a round (and of every sweep point); each one also decides what its gate reports."""

    # |ratio(baseline first) − ratio(candidate first)| above this refuses the row
    directional_limit: float = 0.02
    min_clock: float = 0.70  # loaded SM clock / max; 0 turns the gate off
    parity: bool = True  # outputs of arms declared the same program must agree bitwise
    confidence: float = CONFIDENCE  # of the ratio's interval
    same_within: float = SAME_WITHIN  # 'same' when the interval lies within 1 ± this

    def __post_init__(self) -> None:
        if not 0 < self.directional_limit < math.inf:
            raise ValueError(
                f"the directional-disagreement limit must be a positive number, got {self.directional_limit}"
            )
        if not 0 <= self.min_clock <= 1:
            raise ValueError("the loaded-clock fraction must lie in [0, 1]")
        if not 0 < self.confidence < 1:
            raise ValueError(f"the confidence level must lie in (0, 1), got {self.confidence}")
        if not 0 <= self.same_within < math.inf:
            raise ValueError(f"the 'same' tolerance must be a number ≥ 0, got {self.same_within}")

    def to_json(self) -> dict[str, Any]:
        """As receipts and sweep records hold them (no schema key: their file's schema covers it)."""
        return asdict(self)

    @classmethod
    def from_json(cls, content: Mapping[str, Any] | None, path: Path | str = "gates") -> Gates:
        """Gates as a file holds them; absent ones read as the defaults, unknown keys are left."""
        return _reading(path, "gates", lambda: _gates(content or {}, ""))


def _gates(g: Mapping[str, Any], at: str) -> Gates:
    _check_schema(g, GATES_FORMAT)
    d = Gates()
    _not_null(g, [f.name for f in fields(Gates)], at)
    values = {
        "directional_limit": _field(g, "directional_limit", _number(0, open_low=True), at, d.directional_limit),
        "min_clock": _field(g, "min_clock", _number(0, 1), at, d.min_clock),
        "parity": _field(g, "parity", _bool, at, d.parity),
        "confidence": _field(g, "confidence", _number(0, 1, open_low=True, open_high=True), at, d.confidence),
        "same_within": _field(g, "same_within", _number(0), at, d.same_within),
    }
    try:
        return Gates(**values)
    except ValueError as err:
        raise Invalid(str(err)) from None


def read_protocol(value: Any, name: str) -> Protocol:
    """A field check (:func:`traceattr.core.fields._field`): the object at *name* as a :class:`Protocol`."""
    return _protocol(_object(value, name), f"{name}.")


def read_gates(value: Any, name: str) -> Gates:
    """A field check: the object at *name* as :class:`Gates`."""
    return _gates(_object(value, name), f"{name}.")


# The commands' defaults, where they really differ: profile times a fixed number of iterations without a hold;
# a round (and each sweep step, a one-round comparison) adds iterations until every median is within ±0.5%,
# up to 500, and holds the GPU while the host enqueues each group.
PROFILE = Protocol()
ROUND = replace(PROFILE, max_noise=0.005, max_iters=DEFAULT_MAX_ITERS, hold_us=HOLD_ON_US)
SWEEP = ROUND
PRESETS: dict[str, Protocol] = {"profile": PROFILE, "round": ROUND, "sweep": SWEEP}

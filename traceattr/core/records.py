"""The JSON files of run and round folders, as typed records: one reader and one writer each.

======================  ==========================  =====================================================
file                    record                      written by
======================  ==========================  =====================================================
``plan.json``           :class:`RunPlan`            ``profile``; read by the runner on the GPU
``runner.json``         :class:`RunnerRecord`       the runner (:mod:`traceattr.runner.loop`'s docstring)
``run.json``            :class:`RunRecord`          ``profile``, last: a run folder with it is complete
``receipt.json``        :class:`ReceiptRecord`      ``round``, last: a round folder with it is complete
``sweep.json``         :class:`SweepRecord`       ``sweep``, after every step; complete with a ``result``
======================  ==========================  =====================================================

Every record has ``to_json``/``from_json`` and a versioned ``schema`` string
(``traceattr.plan/1`` …). Files written before the key existed have none and
read as version 1; a file of a later version is refused rather than
misread. ``from_json`` treats the content as input: wrong types, values out
of range and impossible structure end in one :class:`TraceError` line naming
the file and the field, never a traceback. Plain data only (this is core):
the receipt's rows are dicts here; :mod:`traceattr.analysis.rounds` makes
them a frame.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from traceattr.core import runfolder
from traceattr.core.fields import (
    _MISSING,
    Invalid,
    _any_number,
    _as_written,
    _bool,
    _check_schema,
    _field,
    _int,
    _list,
    _not_null,
    _number,
    _object,
    _objects,
    _one_of,
    _positive,
    _read_in,
    _reading,
    _str,
    read_object,
    section,
)
from traceattr.core.protocol import (
    CAPTURES,
    MAX_HOLD_US,
    MAX_ITERS,
    PROFILE,
    Gates,
    Protocol,
    read_gates,
    read_protocol,
)
from traceattr.core.shapes import MAX_CACHED_TOKENS

PLAN_FORMAT = "traceattr.plan/1"
RUNNER_FORMAT = "traceattr.runner/1"
RUN_FORMAT = "traceattr.run/1"
RECEIPT_FORMAT = "traceattr.receipt/2"
# /1 called a round's captures "rounds" (rounds, retry_rounds, baseline_rounds_us, …): read under today's names  # /1 names
OLD_RECEIPT_FORMAT = "traceattr.receipt/1"
_RECEIPT_RENAMED = {  # /1 names
    "rounds": "captures",  # /1 names
    "retry_rounds": "retry_captures",  # /1 names
    "iters_rounds": "iters_captures",  # /1 names
    "baseline_rounds_us": "baseline_captures_us",  # /1 names
    "candidate_rounds_us": "candidate_captures_us",  # /1 names
    "calls_rounds": "calls_captures",  # /1 names
}

# how far an arm's output may stray from the reference (max |err| / max |ref|), per KV dtype
DEFAULT_TOLERANCE: Mapping[str, float] = {"bf16": 0.02, "fp8": 0.08}
MAX_CAPTURES = 1000  # captures in one round (or retry): each is a whole nsys run
MAX_ATTEMPTS = 1000  # retries of one row
MAX_CTX = MAX_CACHED_TOKENS  # the shape grammar's bound (batch × ctx tokens of KV)
# what runs before each timed call to leave it cold (traceattr.runner.flush says what each does)
FLUSH_KINDS: tuple[str, ...] = ("fill+evict", "fill")


# -- plan.json ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunPlan:
    """What the runner process is asked to do (plan.json): plain data, so the process nsys launches needs only it."""

    shapes: tuple[str, ...]  # canonical shape names
    arms: tuple[str, ...]  # arm texts (traceattr.backends.arms grammar, labels distinct), in A B … order
    # the protocol's fields (traceattr.core.protocol.Protocol, where each is described), flat as plan.json
    # holds them; the defaults are the record's (the "profile" preset)
    iters: int = PROFILE.iters
    max_noise: float | None = PROFILE.max_noise
    max_iters: int | None = PROFILE.max_iters
    warmup: int = PROFILE.warmup
    flush_bytes: int = 256 << 20  # as resolved for the GPU (≥ 2× L2; H200: 60 MB, B200: 126 MB)
    flush_kind: str = "fill+evict"  # runner.flush: a fill alone leaves a call's lines and pages warm
    between: str = PROFILE.between
    order: str = PROFILE.order
    hold_us: float = PROFILE.hold_us
    lead: bool = PROFILE.lead
    graphs: bool = PROFILE.graphs  # an arm's [graphs] does it for one arm
    shuffle: bool = False  # scatter each request's KV pages over the cache
    seed: int = PROFILE.seed
    validate: bool = True  # compare with the torch reference before timing; refuse wrong kernels
    tolerance: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCE))
    results: str = runfolder.RUNNER  # written into the run folder
    capture_range: bool = True  # start/stop nsys capture around the timed loop (cudaProfilerApi)

    @classmethod
    def of(cls, shapes: tuple[str, ...], arms: tuple[str, ...], protocol: Protocol, *, flush_bytes: int,
           shuffle: bool = False, validate: bool = True) -> RunPlan:  # fmt: skip
        """The plan that runs *protocol* (its flush resolved to *flush_bytes* for the GPU)."""
        p = protocol
        return cls(shapes=shapes, arms=arms, iters=p.iters, max_noise=p.max_noise, max_iters=p.max_iters,
                   warmup=p.warmup, flush_bytes=flush_bytes, between=p.between, order=p.order, hold_us=p.hold_us,
                   lead=p.lead, graphs=p.graphs, shuffle=shuffle, seed=p.seed, validate=validate)  # fmt: skip

    @property
    def protocol(self) -> Protocol:
        """The protocol this plan runs (the flush as resolved)."""
        return Protocol(iters=self.iters, warmup=self.warmup, max_noise=self.max_noise, max_iters=self.max_iters,
                        hold_us=self.hold_us, lead=self.lead, between=self.between, flush_bytes=self.flush_bytes,
                        graphs=self.graphs, seed=self.seed, order=self.order)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"schema": PLAN_FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, content: Mapping[str, Any], path: Path | str = runfolder.PLAN) -> RunPlan:
        return _reading(path, "plan", lambda: cls._parse(content))

    @classmethod
    def _parse(cls, content: Mapping[str, Any]) -> RunPlan:
        _check_schema(content, PLAN_FORMAT)
        unknown = set(content) - {f.name for f in fields(cls)} - {"schema"}
        if unknown:
            raise Invalid(f"unknown field {sorted(unknown)[0]!r:.60}")
        d = cls.__dataclass_fields__
        opt: dict[str, Any] = {
            "iters": _field(content, "iters", _int(1, MAX_ITERS), default=d["iters"].default),
            "max_noise": _field(content, "max_noise", _number(0, 1, open_low=True, open_high=True), default=None),
            "max_iters": _field(content, "max_iters", _int(1, MAX_ITERS), default=None),
            "warmup": _field(content, "warmup", _int(0, MAX_ITERS), default=d["warmup"].default),
            "flush_bytes": _field(content, "flush_bytes", _int(1, 1 << 40), default=d["flush_bytes"].default),
            "between": _field(content, "between", _str, default=d["between"].default),
            "order": _field(content, "order", _str, default=d["order"].default),
            # a plan written before flush kinds existed ran the plain fill
            "flush_kind": _field(content, "flush_kind", _one_of(FLUSH_KINDS), default="fill"),
            "hold_us": _field(content, "hold_us", _number(0, MAX_HOLD_US), default=d["hold_us"].default),
            "seed": _field(content, "seed", _int(), default=d["seed"].default),
            "results": _field(content, "results", _str, default=d["results"].default),
        }
        for name in ("graphs", "shuffle", "validate", "capture_range"):
            opt[name] = _field(content, name, _bool, default=d[name].default)
        opt["lead"] = _field(content, "lead", _bool, default=False)  # a plan written before leads ran none
        if "tolerance" in content:
            opt["tolerance"] = _field(content, "tolerance", _objects(_number(0, open_low=True)))
        return cls(shapes=tuple(_field(content, "shapes", _list(_str))),
                   arms=tuple(_field(content, "arms", _list(_str))), **opt)  # fmt: skip

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> RunPlan:
        return cls.from_json(read_object(path, "plan"), path)


# -- runner.json -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArmIdentity:
    """runner.json ``arms[label]``: equal ``program`` strings mean the same program (outputs agree bitwise)."""

    backend: str | None = None
    program: str | None = None


@dataclass(frozen=True)
class ArmCheck:
    """runner.json ``shapes[shape].backends[label]``: how the arm fared before timing."""

    status: str | None = None  # ok | unavailable | wrong | failed
    reason: str | None = None
    relative_error: float | None = None  # vs the torch reference (NaN possible: not checked)
    output_sha256: str | None = None


@dataclass(frozen=True)
class ShapeClocks:
    """runner.json ``shapes[shape].clocks``: NVML SM clock over the shape's timed calls (None: no NVML)."""

    sm_clock_mhz_median: float | None = None
    sm_clock_max_mhz: float | None = None
    fraction: float | None = None

    @property
    def loaded_fraction(self) -> float | None:
        """median / max SM clock, from ``fraction`` or else the two clocks; None when not measured."""
        finite = [v if v is not None and math.isfinite(v) else None
                  for v in (self.fraction, self.sm_clock_mhz_median, self.sm_clock_max_mhz)]  # fmt: skip
        fraction, mhz, top = finite
        if fraction is None and mhz is not None and top:
            return mhz / top
        return fraction

    @property
    def mhz(self) -> float | None:
        v = self.sm_clock_mhz_median
        return v if v is not None and math.isfinite(v) else None


@dataclass(frozen=True)
class ShapeHold:
    """runner.json ``shapes[shape].hold``: how the host-released hold fared (groups 0: no hold ran)."""

    groups: int = 0
    timeouts: int = 0
    gpu_wait_us: float | None = None  # the median GPU wait for the host per group (``gpu_wait_us.median``)


@dataclass(frozen=True)
class ShapeRun:
    """runner.json ``shapes[shape]``: every arm's check, the loaded clock and the hold."""

    backends: Mapping[str, ArmCheck] = field(default_factory=dict)
    clocks: ShapeClocks = field(default_factory=ShapeClocks)
    hold: ShapeHold = field(default_factory=ShapeHold)


@dataclass(frozen=True)
class RunnerProtocol:
    """runner.json ``protocol``: the protocol as the runner ran it; None where that runner did not say
    (a runner written before the hold or the lead existed)."""

    between: str | None = None
    order: str | None = None
    flush_bytes: int | None = None
    flush_kind: str | None = None  # FLUSH_KINDS
    graphs: bool | None = None
    hold: str | None = None  # "host" (released by the host) or "none"
    lead: bool | None = None


def read_runner_protocol(value: Any, name: str) -> RunnerProtocol:
    """A field check: runner.json's ``protocol`` (also as a receipt's header copies it, ``runner.protocol``)."""
    p, at = _object(value, name), f"{name}."
    return RunnerProtocol(
        between=_field(p, "between", _str, at, None), order=_field(p, "order", _str, at, None),
        flush_bytes=_field(p, "flush_bytes", _int(0), at, None), flush_kind=_field(p, "flush_kind", _str, at, None),
        graphs=_field(p, "graphs", _bool, at, None), hold=_field(p, "hold", _one_of(("host", "none")), at, None),
        lead=_field(p, "lead", _bool, at, None),
    )  # fmt: skip


_EVENT_KEYS = ("backend", "shape", "iter", "event_us")


def _arm_identity(value: Any, name: str) -> ArmIdentity:
    v = _object(value, name)
    return ArmIdentity(_field(v, "backend", _str, f"{name}.", None), _field(v, "program", _str, f"{name}.", None))


def _arm_check(value: Any, name: str) -> ArmCheck:
    v, at = _object(value, name), f"{name}."
    return ArmCheck(_field(v, "status", _str, at, None), _field(v, "reason", _str, at, None),
                    _field(v, "relative_error", _any_number, at, None),
                    _field(v, "output_sha256", _str, at, None))  # fmt: skip


def _shape_run(value: Any, name: str) -> ShapeRun:
    v, at = _object(value, name), f"{name}."
    clocks = _field(v, "clocks", _object, at, {})
    where = f"{at}clocks."
    measured = (
        _field(clocks, k, _any_number, where, None) for k in ("sm_clock_mhz_median", "sm_clock_max_mhz", "fraction")
    )
    return ShapeRun(_field(v, "backends", _objects(_arm_check), at, {}), ShapeClocks(*measured),
                    _field(v, "hold", _shape_hold, at, ShapeHold()))  # fmt: skip


def _shape_hold(value: Any, name: str) -> ShapeHold:
    h, at = _object(value, name), f"{name}."
    wait = _field(h, "gpu_wait_us", _object, at, {})
    return ShapeHold(_field(h, "groups", _int(0), at, 0), _field(h, "timeouts", _int(0), at, 0),
                     _field(wait, "median", _any_number, f"{at}gpu_wait_us.", None))  # fmt: skip


def _event(value: Any, name: str) -> dict[str, Any]:
    v = _object(value, name)
    if not set(_EVENT_KEYS) <= v.keys():
        raise Invalid(f"expected its events to be objects with {', '.join(sorted(_EVENT_KEYS))}")
    at = f"{name}."
    return {**v, "backend": _field(v, "backend", _str, at), "shape": _field(v, "shape", _str, at),
            "iter": _field(v, "iter", _int(0, 1 << 31), at),
            "event_us": _field(v, "event_us", _number(0, open_low=True), at)}  # fmt: skip  # as the events table types them


@dataclass(frozen=True)
class RunnerRecord:
    """runner.json, what the runner saw (format: :mod:`traceattr.runner.loop`'s docstring).

    The typed fields are what traceattr reads; ``content`` is the file as written, whose GPU facts,
    versions, clocks, arms and protocol go verbatim into run.json and the receipt's header.
    """

    timed: bool
    arms: Mapping[str, ArmIdentity]
    shapes: Mapping[str, ShapeRun]
    events: tuple[dict[str, Any], ...]
    flush_bytes: int | None  # protocol.flush_bytes, else plan.flush_bytes
    low_clock_mhz: float | int | None  # the timed loop's median SM clock (as written) when the runner flagged it low
    content: Mapping[str, Any] = field(repr=False, default_factory=dict)
    protocol: RunnerProtocol = field(default_factory=RunnerProtocol)

    def facts(self, key: str) -> Any:
        """A part of the file passed along as it is (``gpu``, ``versions``, ``clocks``, ``protocol``, …)."""
        return self.content.get(key)

    def shape(self, shape: str) -> ShapeRun:
        return self.shapes.get(shape, ShapeRun())

    def check(self, shape: str, arm: str) -> ArmCheck:
        return self.shape(shape).backends.get(arm, ArmCheck())

    def to_json(self) -> dict[str, Any]:
        return dict(self.content)  # the runner writes it: no schema key of ours is added to its file

    @classmethod
    def from_json(cls, content: Mapping[str, Any], path: Path | str = runfolder.RUNNER) -> RunnerRecord:
        return _reading(path, "runner record", lambda: cls._parse(content))

    @classmethod
    def _parse(cls, c: Mapping[str, Any]) -> RunnerRecord:
        _check_schema(c, RUNNER_FORMAT)
        protocol = _field(c, "protocol", _object, default={})
        plan = _field(c, "plan", _object, default={})
        flush = _field(protocol, "flush_bytes", _int(0), "protocol.", None) or _field(
            plan, "flush_bytes", _int(0), "plan.", None
        )
        clocks = _field(c, "clocks", _object, default={})
        low = _field(clocks, "low_clock", _bool, "clocks.", False)
        return cls(
            timed=bool(_field(c, "timed", _bool, default=False)),
            arms=_field(c, "arms", _objects(_arm_identity), default={}),
            shapes=_field(c, "shapes", _objects(_shape_run), default={}),
            events=tuple(_field(c, "events", _list(_event), default=[])),
            flush_bytes=flush,
            low_clock_mhz=_field(clocks, "sm_clock_mhz_median", _as_written(_any_number), "clocks.", None)
            if low
            else None,
            content=dict(c),
            protocol=read_runner_protocol(protocol, "protocol"),
        )

    @classmethod
    def read(cls, path: Path) -> RunnerRecord:
        return cls.from_json(read_object(path, "runner record"), path)


def read_runner(folder: Path) -> RunnerRecord | None:
    """A run folder's runner.json; None when *folder* is not a folder or has none."""
    content = _read_in(folder, runfolder.RUNNER)
    return None if content is None else RunnerRecord.from_json(content, Path(folder) / runfolder.RUNNER)


def runner_events(folder: Path) -> list[dict[str, Any]] | None:
    """The CUDA-event times of a run folder's runner.json (``backend, shape, iter, event_us`` each); None without one."""
    runner = read_runner(folder)
    return None if runner is None else list(runner.events)


# -- run.json ----------------------------------------------------------------------------------

_RUN_TEXT = ("tool", "command", "version", "nsys_command", "nsys_version", "peak_bandwidth_source")
_RUN_NUMBERS = ("peak_bandwidth", "capture_seconds", "analysis_seconds")
_RUN_TEXTS = ("argv", "notes", "outputs")


@dataclass(frozen=True)
class RunRecord:
    """run.json, the manifest ``profile`` writes last: commands, versions, the runner's facts, outputs.

    ``facts`` is every entry in the order written (the report shows them all); the typed fields are
    the ones traceattr reads itself.
    """

    facts: Mapping[str, Any]
    outputs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, facts: Mapping[str, Any]) -> RunRecord:
        """A record of what profile is about to write (checked like a file read back)."""
        return cls.from_json(facts, runfolder.RUN)

    def to_json(self) -> dict[str, Any]:
        return {"schema": RUN_FORMAT, **self.facts}

    @classmethod
    def from_json(cls, content: Mapping[str, Any], path: Path | str = runfolder.RUN) -> RunRecord:
        return _reading(path, "run record", lambda: cls._parse(content))

    @classmethod
    def _parse(cls, c: Mapping[str, Any]) -> RunRecord:
        _check_schema(c, RUN_FORMAT)
        for key in _RUN_TEXT:
            _field(c, key, _str, default=None)
        for key in _RUN_NUMBERS:
            _field(c, key, _any_number, default=None)
        texts = {k: tuple(_field(c, k, _list(_str), default=[])) for k in _RUN_TEXTS}
        for key in ("plan", "gpu", "versions", "clocks", "arms", "protocol", "backends"):
            _field(c, key, _object, default=None)
        return cls({k: v for k, v in c.items() if k != "schema"}, texts["outputs"], texts["notes"])


def read_run(folder: Path) -> RunRecord | None:
    """A run folder's run.json; None when *folder* is not a folder or has none."""
    content = _read_in(folder, runfolder.RUN)
    return None if content is None else RunRecord.from_json(content, Path(folder) / runfolder.RUN)


# -- receipt.json ------------------------------------------------------------------------------

# The receipt's row columns and their JSON types (analysis.rounds builds its frame schema from this).
RECEIPT_COLUMNS: dict[str, str] = {
    "row": "str", "shape": "str", "attempt": "int", "status": "str", "refused_by": "str",
    "baseline_us": "float", "candidate_us": "float", "ratio": "float", "low": "float", "high": "float",
    "verdict": "str", "captures": "int", "pairs": "int", "iters_captures": "list[int]", "noise": "float",
    "baseline_captures_us": "list[float]", "candidate_captures_us": "list[float]",
    "arms_gate": "str", "arms_note": "str", "directional": "float", "directional_gate": "str",
    "clock_fraction": "float", "clock_mhz": "float", "clock_gate": "str",
    "parity": "str", "parity_value": "str", "parity_gate": "str",
    "sensitivity": "float", "baseline_shift": "float", "candidate_shift": "float", "flagged": "bool",
    # why a refused row was refused (analysis.causes; absent in receipts written before): the mechanisms the
    # captures show, in words with the numbers, and the evidence they come from
    "causes": "list[str]", "cause": "str", "stopped": "str",
    "baseline_after_self": "list[float]", "baseline_after_other": "list[float]",  # [median, low, high] µs
    "candidate_after_self": "list[float]", "candidate_after_other": "list[float]",
    "baseline_modes": "list[float]", "candidate_modes": "list[float]",  # [lower µs, upper µs, upper share]
    "host_bound_baseline": "list[int]", "host_bound_candidate": "list[int]", "calls_captures": "list[int]",
    "hold_timeouts": "int", "hold_gpu_wait_us": "float",
}  # fmt: skip
_REQUIRED_COLUMNS = ("row", "shape", "attempt", "status", "verdict")
_ROW_STATUS = ("pass", "refused")


_COLUMN_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "str": _str,
    "int": _int(),
    "float": _any_number,  # a measured value (NaN as Python's json writes it included)
    "bool": _bool,
    "list[int]": _list(_int()),
    "list[float]": _list(_any_number),
    "list[str]": _list(_str),
}


# columns whose values are measured times or their ratios: above 0 (or NaN, not measured)
_POSITIVE_COLUMNS = frozenset({"baseline_us", "candidate_us", "ratio", "low", "high", "clock_mhz", "hold_gpu_wait_us"})


def _receipt_row(value: Any, name: str) -> dict[str, Any]:
    row = _object(value, name)
    out: dict[str, Any] = {}
    for column, kind in RECEIPT_COLUMNS.items():
        default = _MISSING if column in _REQUIRED_COLUMNS else None
        check = _positive if column in _POSITIVE_COLUMNS else _COLUMN_CHECKS[kind]
        out[column] = _field(row, column, check, f"{name}.", default)
    if not 1 <= out["attempt"] <= MAX_ATTEMPTS:
        raise Invalid(f"{name}.attempt must lie in [1, {MAX_ATTEMPTS}], got {out['attempt']}")
    if out["status"] not in _ROW_STATUS:
        raise Invalid(f"{name}.status must be pass or refused, got {out['status']!r:.40}")
    return out


def _round_protocol(value: Any, name: str) -> dict[str, Any]:
    """A receipt's protocol: what a retry runs again, so every count and size is bounded here."""
    p, at = _object(value, name), f"{name}."
    iters = _field(p, "iters", _int(2, MAX_ITERS), at, None)
    checks: dict[str, Callable[[Any, str], Any]] = {
        "captures": _int(1, MAX_CAPTURES), "warmup": _int(1, MAX_ITERS),
        "max_noise": _number(0, 1, open_low=True, open_high=True), "max_iters": _int(iters or 2, MAX_ITERS),
        "hold_us": _number(0, MAX_HOLD_US), "hold": _bool, "lead": _bool, "between": _str, "order": _str, "flush_bytes": _int(1, 1 << 40),
        "graphs": _bool, "sensitivity": _bool, "seed": _int(),
    }  # fmt: skip
    _not_null(p, checks.keys() - {"max_noise", "max_iters", "flush_bytes"}, at)  # null there: "not set"
    for key, check in checks.items():
        _field(p, key, check, at, None)
    read_protocol(p, name)  # and it reads as the record a retry runs
    return dict(p)


def _round_gates(value: Any, name: str) -> dict[str, Any]:
    read_gates(value, name)
    return dict(value)


def _renamed(obj: Any) -> Any:
    """*obj* with /1's keys under today's names (anything not an object as it is: the checks refuse it)."""
    return {_RECEIPT_RENAMED.get(k, k): v for k, v in obj.items()} if isinstance(obj, Mapping) else obj


def _receipt_v1(c: Mapping[str, Any]) -> dict[str, Any]:
    """A /1 receipt (or one written before schemas) as /2 holds it: the same facts, captures named captures."""
    out = {k: v for k, v in _renamed(c).items() if k != "captures"}
    if "captures" in c:
        out["captures"] = c["captures"]  # the folder names: the same key in both versions
    if isinstance(c.get("protocol"), Mapping):
        protocol = _renamed(c["protocol"])
        if protocol.get("arm_order") == "alternating between rounds":  # /1 names
            protocol["arm_order"] = "alternating between captures"
        out["protocol"] = protocol
    if isinstance(c.get("rows"), list):
        out["rows"] = [_renamed(row) for row in c["rows"]]
    return out


@dataclass(frozen=True)
class ReceiptRecord:
    """receipt.json: ``header`` (what was compared and how), ``summary``, the capture folders, one row per attempt."""

    header: Mapping[str, Any]
    rows: tuple[dict[str, Any], ...]
    captures: tuple[str, ...] = ()
    summary: Mapping[str, Any] = field(default_factory=dict)

    @property
    def protocol(self) -> Protocol:
        """How the round measured (the header's protocol, checked when the file was read)."""
        return Protocol.from_json(self._header_object("protocol"), "receipt protocol")

    @property
    def gates(self) -> Gates:
        return Gates.from_json(self._header_object("gates"), "receipt gates")

    @property
    def round_captures(self) -> int:
        """The round's own captures (receipts written before the key: 3, the default)."""
        return int(self._header_object("protocol").get("captures", CAPTURES))

    @property
    def rows_source(self) -> str:
        return str(self.header.get("rows_source", ""))

    def _header_object(self, key: str) -> Mapping[str, Any]:
        return section(self.header, key)

    @property
    def arms(self) -> tuple[str, str]:
        """(baseline, candidate) as the arm texts a retry runs (the labels for receipts written before ``arms``)."""
        arms = self._header_object("arms")
        return arms.get("baseline", self.header["baseline"]), arms.get("candidate", self.header["candidate"])

    @property
    def captures_done(self) -> int:
        """Captures run so far: the round's, then every retry's (a retry continues the numbering)."""
        done, retries = self._header_object("protocol").get("captures"), self.header.get("retry_captures")
        return int(done if done is not None else 0) + (sum(retries) if retries else 0)

    def to_json(self) -> dict[str, Any]:
        return {"schema": RECEIPT_FORMAT, **self.header, "summary": dict(self.summary),
                "captures": list(self.captures), "rows": list(self.rows)}  # fmt: skip

    @classmethod
    def from_json(cls, content: Mapping[str, Any], path: Path | str = f"{runfolder.RECEIPT}.json") -> ReceiptRecord:
        return _reading(path, "receipt", lambda: cls._parse(content))

    @classmethod
    def _parse(cls, c: Mapping[str, Any]) -> ReceiptRecord:
        _check_schema(c, RECEIPT_FORMAT, OLD_RECEIPT_FORMAT)
        if c.get("schema", OLD_RECEIPT_FORMAT) == OLD_RECEIPT_FORMAT:
            c = _receipt_v1(c)
        if c.get("command") != "round":
            raise Invalid("not a traceattr round receipt")
        _field(c, "baseline", _str)
        _field(c, "candidate", _str)
        arms = _field(c, "arms", _object, default={})
        _not_null(arms, ("baseline", "candidate"), "arms.")
        _not_null(c, ("rows_source",), "")
        for key in ("baseline", "candidate"):
            _field(arms, key, _str, "arms.", None)
        _field(c, "rows_source", _str, default=None)
        _field(c, "protocol", _round_protocol, default=None)
        _field(c, "gates", _round_gates, default=None)
        _field(c, "retry_captures", _list(_int(1, MAX_CAPTURES)), default=None)
        _field(_field(c, "runner", _object, default={}), "protocol", read_runner_protocol, "runner.", None)
        rows = tuple(_field(c, "rows", _list(_receipt_row)))
        captures = tuple(_field(c, "captures", _list(_str), default=[]))
        header = {k: v for k, v in c.items() if k not in ("schema", "summary", "captures", "rows")}
        record = cls(header, rows, captures, _field(c, "summary", _object, default={}))
        if record.captures_done > MAX_CAPTURES * 10:
            raise Invalid(f"{record.captures_done} captures so far: more than a retry may continue")
        return record

    @classmethod
    def read(cls, path: Path) -> ReceiptRecord:
        return cls.from_json(read_object(path, "receipt"), path)


# -- sweep.json (traceattr sweep) ---------------------------------------------------------------

SWEEP_FORMAT = "traceattr.sweep/1"
OLD_SWEEP_FORMAT = "traceattr.search/1"  # the same record before the feature had one name (read, never written)
SWEEP_FILE = "sweep.json"  # in a sweep folder, beside one run folder per step (step-1, step-2, …)
OLD_SWEEP_FILE = "search.json"  # what sweep folders written before sweep.json hold


def sweep_file(folder: Path) -> Path | None:
    """The sweep record of sweep folder *folder* (sweep.json, else an older folder's search.json), else None."""
    for name in (SWEEP_FILE, OLD_SWEEP_FILE):
        if (folder / name).is_file():
            return folder / name
    return None


# who is really faster at a measured ctx (analysis.sweep_steps.side_of), and what a sweep concluded (analysis.sweep_steps)
SWEEP_SIDES: tuple[str, ...] = ("below", "above", "same", "ambiguous", "refused")
SWEEP_KINDS: tuple[str, ...] = (
    "measure", "crossover", "tie band", "undecided band", "several crossovers", "no crossover", "budget",
    "resolution", "refused",
)  # fmt: skip
MAX_STEPS = 100  # captures one sweep may run


def _ctx_pair(value: Any, name: str) -> list[int]:
    pair = _list(_int(1, MAX_CTX))(value, name)
    if len(pair) != 2 or pair[0] > pair[1]:
        raise Invalid(f"{name} must be [low, high] with low ≤ high, got {value!r:.40}")
    return pair


def _decision(value: Any, name: str) -> dict[str, Any]:
    d, at = _object(value, name), f"{name}."
    _field(d, "kind", _one_of(SWEEP_KINDS), at)
    _field(d, "next_ctx", _int(1, MAX_CTX), at, None)
    for key in ("bracket", "band"):
        _field(d, key, _ctx_pair, at, None)
    _field(d, "estimate", _int(1, MAX_CTX), at, None)
    for key in ("half_width", "width"):
        _field(d, key, _number(0, 1), at, None)
    _field(d, "refused", _refusal, at, None)
    _field(d, "crossings", _list(_ctx_pair), at, None)
    _field(d, "ends", _list(_one_of(SWEEP_SIDES)), at, None)
    _field(d, "swapped", _bool, at, None)
    return dict(d)


def _refusal(value: Any, name: str) -> dict[str, Any]:
    r, at = _object(value, name), f"{name}."
    _field(r, "ctx", _int(1, MAX_CTX), at)
    _field(r, "cause", _str, at, "")
    return dict(r)


def _sweep_point(value: Any, name: str) -> dict[str, Any]:
    p, at = _object(value, name), f"{name}."
    _field(p, "ctx", _int(1, MAX_CTX), at)
    _field(p, "shape", _str, at)
    _field(p, "side", _one_of(SWEEP_SIDES), at)
    _field(p, "status", _one_of(_ROW_STATUS), at)
    for key in ("ratio", "low", "high"):
        _field(p, key, _positive, at, None)
    _field(p, "medians_us", _objects(_number(0, open_low=True)), at, None)
    _field(p, "gates", _object, at, None)
    _field(p, "fastest", _str, at, None)
    _field(p, "refused_by", _str, at, None)
    _field(p, "verdict", _str, at, None)
    return dict(p)


def _sweep_step(value: Any, name: str) -> dict[str, Any]:
    s, at = _object(value, name), f"{name}."
    _field(s, "step", _int(1, MAX_STEPS), at)
    _field(s, "folder", _str, at)
    _field(s, "points", _list(_sweep_point), at)
    _field(s, "decision", _decision, at)
    _field(s, "seconds", _number(0), at, None)
    return dict(s)


@dataclass(frozen=True)
class SweepPoint:
    """sweep.json ``steps[i].points[j]``: one measured ctx with its side, ratio, medians and gates (as written)."""

    ctx: int
    shape: str
    side: str  # SWEEP_SIDES
    status: str  # pass | refused
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    refused_by: str | None = None
    verdict: str | None = None
    medians_us: Mapping[str, float] = field(default_factory=dict)  # per arm label, fastest first
    fastest: str | None = None

    @property
    def refusal(self) -> str:
        """Why the point was refused, as the sweep named it: its failed gates, else its status."""
        return self.refused_by if self.refused_by else self.status


@dataclass(frozen=True)
class SweepStep:
    """sweep.json ``steps[i]``: one capture, its points, and the decision after it (``Decision.to_json``)."""

    step: int
    folder: str
    points: tuple[SweepPoint, ...]
    decision: Mapping[str, Any]
    seconds: float | None = None


def _typed_point(p: Mapping[str, Any]) -> SweepPoint:
    """A checked point (:func:`_sweep_point`) as its record; values as written (an int ratio stays an int)."""
    medians = p.get("medians_us")
    return SweepPoint(p["ctx"], p["shape"], p["side"], p["status"], p.get("ratio"), p.get("low"), p.get("high"),
                       p.get("refused_by"), p.get("verdict"), {} if medians is None else medians,
                       p.get("fastest"))  # fmt: skip


@dataclass(frozen=True)
class SweepRecord:
    """sweep.json of ``traceattr sweep``: what was swept (``header``), each step's captured points with
    their gates and the decision after it, and the ``result`` (None: the sweep did not finish)."""

    header: Mapping[str, Any]
    steps: tuple[dict[str, Any], ...] = ()
    result: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"schema": SWEEP_FORMAT, **self.header, "steps": list(self.steps),
                "result": None if self.result is None else dict(self.result)}  # fmt: skip

    @functools.cached_property
    def steps_taken(self) -> tuple[SweepStep, ...]:
        """The steps as typed records (``steps`` keeps them as the file holds them, for the dispatch table)."""
        checked = [_sweep_step(s, f"steps[{i}]") for i, s in enumerate(self.steps)]
        return tuple(SweepStep(s["step"], s["folder"], tuple(_typed_point(p) for p in s["points"]), s["decision"],
                                s.get("seconds")) for s in checked)  # fmt: skip

    @property
    def below(self) -> str | None:
        """The fastest arm at the low end (None until step 1 is recorded)."""
        return self.header.get("below")

    @property
    def above(self) -> str | None:
        """The fastest arm at the high end (its runner-up there when the same as ``below``)."""
        return self.header.get("above")

    @property
    def seconds(self) -> float:
        """The capture seconds of every step (0 where not recorded)."""
        return sum(s.seconds for s in self.steps_taken if s.seconds is not None)

    @property
    def passing_folders(self) -> tuple[str, ...]:
        """The step run folders with at least one point that passed every gate."""
        return tuple(s["folder"] for s in self.steps if any(p["status"] == "pass" for p in s["points"]))

    @classmethod
    def from_json(cls, content: Mapping[str, Any], path: Path | str = SWEEP_FILE) -> SweepRecord:
        return _reading(path, "sweep record", lambda: cls._parse(content))

    @classmethod
    def _parse(cls, c: Mapping[str, Any]) -> SweepRecord:
        _check_schema(c, SWEEP_FORMAT, OLD_SWEEP_FORMAT)
        if c.get("command") != "sweep":
            raise Invalid("not a traceattr sweep record")
        _field(c, "family", _str)
        _field(c, "arms", _list(_str))
        _field(c, "ctx_range", _ctx_pair)
        _field(c, "width", _number(0, 1, open_low=True, open_high=True))
        _field(c, "max_steps", _int(1, MAX_STEPS))
        _field(c, "graphs", _bool, default=False)
        steps = tuple(_field(c, "steps", _list(_sweep_step), default=[]))
        result = _field(c, "result", _decision, default=None)
        header = {k: v for k, v in c.items() if k not in ("schema", "steps", "result")}
        return cls(header, steps, result)

    @classmethod
    def read(cls, path: Path) -> SweepRecord:
        return cls.from_json(read_object(path, "sweep record"), path)

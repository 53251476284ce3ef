"""The JSON files of run and round folders, as typed records: one reader and one writer each.

======================  ==========================  =====================================================
file                    record                      written by
======================  ==========================  =====================================================
``plan.json``           :class:`RunPlan`            ``profile``; read by the runner on the GPU
``runner.json``         :class:`RunnerRecord`       the runner (:mod:`traceattr.runner.loop`'s docstring)
``run.json``            :class:`RunRecord`          ``profile``, last: a run folder with it is complete
``receipt.json``        :class:`ReceiptRecord`      ``round``, last: a round folder with it is complete
``search.json``         :class:`SearchRecord`       ``sweep``, after every step; complete with a ``result``
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

import json
import math
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from traceattr.core import runfolder
from traceattr.core.errors import TraceError

PLAN_FORMAT = "traceattr.plan/1"
RUNNER_FORMAT = "traceattr.runner/1"
RUN_FORMAT = "traceattr.run/1"
RECEIPT_FORMAT = "traceattr.receipt/1"

MAX_ROUNDS = 1000  # captures in one round (or retry): each is a whole nsys run
MAX_ITERS = 1_000_000  # timed rounds per capture a plan may ask for
# what runs before each timed call to leave it cold (traceattr.runner.flush says what each does)
FLUSH_KINDS: tuple[str, ...] = ("fill+evict", "fill")


class Invalid(ValueError):
    """A field of a record that cannot be used; ``from_json`` turns it into a TraceError naming the file."""


# -- reading a JSON file as input ---------------------------------------------------------


def read_object(path: Path, what: str = "JSON") -> dict[str, Any]:
    """*path* as a JSON object; a TraceError (``unreadable WHAT (why)``) for anything else.

    A FIFO or device is refused before it is opened (reading one could block forever), and
    nesting too deep for the parser is a bad file, not a crash.
    """
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise TraceError(path, f"unreadable {what} (not a regular file)")
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise TraceError(path, f"unreadable {what} ({err})") from None
    except RecursionError:
        raise TraceError(path, f"unreadable {what} (nested too deeply)") from None
    if not isinstance(content, dict):
        raise TraceError(path, f"unreadable {what} (expected a JSON object)")
    return content


def _read_in(folder: Path, name: str) -> dict[str, Any] | None:
    """``folder/name`` as a JSON object; None when *folder* is not a folder or has no such file."""
    path = Path(folder) / name
    if not Path(folder).is_dir() or not path.exists():
        return None
    return read_object(path)


# -- field checks: each returns the value or raises Invalid naming the field ---------------------

_MISSING = object()


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _field(obj: Mapping[str, Any], key: str, check: Callable[[Any, str], Any], where: str = "",
           default: Any = _MISSING) -> Any:  # fmt: skip
    """``obj[key]`` through *check*; *default* when absent or null (no default: required)."""
    name = f"{where}{key}"
    value = obj.get(key)
    if value is None:
        if default is _MISSING:
            raise Invalid(f"{name} is missing")
        return default
    return check(value, name)


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{name} must be text, got {_kind(value)}")
    return value


def _one_of(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def check(value: Any, name: str) -> str:
        if _str(value, name) not in choices:
            raise Invalid(f"{name} must be one of {', '.join(choices)}, got {value!r:.40}")
        return value

    return check


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"{name} must be true or false, got {_kind(value)}")
    return value


def _int(low: int | None = None, high: int | None = None) -> Callable[[Any, str], int]:
    def check(value: Any, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(f"{name} must be an integer, got {_kind(value)} {value!r:.40}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise Invalid(f"{name} must lie in [{low if low is not None else '…'}, "
                          f"{high if high is not None else '…'}], got {value}")  # fmt: skip
        return value

    return check


def _number(low: float = -math.inf, high: float = math.inf, *, open_low: bool = False,
            open_high: bool = False) -> Callable[[Any, str], float]:  # fmt: skip
    """A finite number in the range (ints accepted: JSON writes 2.0 as 2 in other tools)."""

    def check(value: Any, name: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Invalid(f"{name} must be a number, got {_kind(value)} {value!r:.40}")
        v = float(value)
        inside = math.isfinite(v) and (v > low if open_low else v >= low) and (v < high if open_high else v <= high)
        if not inside:
            raise Invalid(f"{name} must lie in {'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}, "
                          f"got {value}")  # fmt: skip
        return v

    return check


def _any_number(value: Any, name: str) -> float:
    """A number as the runner measured it (NaN allowed: "not measured" is decided by the reader)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(f"{name} must be a number, got {_kind(value)} {value!r:.40}")
    return float(value)


def _as_written(check: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    """*check*, keeping the value as the file holds it (an int stays an int when printed)."""

    def keep(value: Any, name: str) -> Any:
        check(value, name)
        return value

    return keep


def _object(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise Invalid(f"{name} must be an object, got {_kind(value)}")
    return value


def _list(item: Callable[[Any, str], Any]) -> Callable[[Any, str], list[Any]]:
    def check(value: Any, name: str) -> list[Any]:
        if not isinstance(value, list):
            raise Invalid(f"{name} must be a list, got {_kind(value)}")
        return [item(v, f"{name}[{i}]") for i, v in enumerate(value)]

    return check


def _objects(item: Callable[[Any, str], Any]) -> Callable[[Any, str], dict[str, Any]]:
    """An object whose every value goes through *item*."""

    def check(value: Any, name: str) -> dict[str, Any]:
        return {str(k): item(v, f"{name}.{k}") for k, v in _object(value, name).items()}

    return check


def _check_schema(content: Mapping[str, Any], schema: str) -> None:
    """Absent (written before schemas) or this version; a later version is refused, not misread."""
    found = content.get("schema", schema)
    if found != schema:
        raise Invalid(f"schema is {found!r:.60}; this traceattr reads {schema!r}")


def _reading(path: Path | str, what: str, read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Invalid as err:
        raise TraceError(path, f"unreadable {what} ({err})") from None


# -- plan.json ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunPlan:
    """What the runner process is asked to do (plan.json): plain data, so the process nsys launches needs only it."""

    shapes: tuple[str, ...]  # canonical shape names
    arms: tuple[str, ...]  # arm texts (traceattr.backends.arms grammar, labels distinct), in A B … order
    iters: int = 20  # rounds: every arm runs once per round (the minimum when max_noise is set)
    max_noise: float | None = None  # add rounds until every arm's median is this precise (fraction)
    max_iters: int | None = None  # ... but never more rounds than this
    warmup: int = 3  # untimed calls per arm after validation (the first also JIT-compiles)
    flush_bytes: int = 256 << 20  # L2 flush before each call; ≥ 2× L2 (H200: 60 MB, B200: 126 MB)
    flush_kind: str = "fill+evict"  # runner.flush: a fill alone leaves a call's lines and pages warm
    between: str = "flush"  # before every timed call: "flush", "flush+ARM" (flush, then ARM's call) or "none"
    order: str = "abba"  # "abba": arms interleaved, reversed on odd rounds; "blocked": each arm's calls back to back
    # > 0: before each group the GPU spins until the host has enqueued the group and releases it (runner.hold),
    # so no call waits for its own launch; the number no longer sets a length (kept so plans and --hold-us read)
    hold_us: float = 0.0
    # each group starts with an untimed call of its last arm (after the hold): the first call after an idle GPU
    # ran 0.4–3.1% faster than the next on the H200, which read as a position effect in every ABBA pair
    lead: bool = True
    graphs: bool = False  # replay every arm's call as a captured CUDA graph (an arm's [graphs] does it for one)
    shuffle: bool = False  # scatter each request's KV pages over the cache
    seed: int = 0
    validate: bool = True  # compare with the torch reference before timing; refuse wrong kernels
    tolerance: dict[str, float] = field(default_factory=lambda: {"bf16": 0.02, "fp8": 0.08})
    results: str = runfolder.RUNNER  # written into the run folder
    capture_range: bool = True  # start/stop nsys capture around the timed loop (cudaProfilerApi)

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
            "hold_us": _field(content, "hold_us", _number(0, 10_000), default=d["hold_us"].default),
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
class ShapeRun:
    """runner.json ``shapes[shape]``: every arm's check and the loaded clock."""

    backends: Mapping[str, ArmCheck] = field(default_factory=dict)
    clocks: ShapeClocks = field(default_factory=ShapeClocks)


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
    return ShapeRun(_field(v, "backends", _objects(_arm_check), at, {}), ShapeClocks(*measured))


def _event(value: Any, name: str) -> dict[str, Any]:
    v = _object(value, name)
    if not set(_EVENT_KEYS) <= v.keys():
        raise Invalid(f"expected its events to be objects with {', '.join(sorted(_EVENT_KEYS))}")
    return dict(v)


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

    def facts(self, key: str) -> Any:
        """A part of the file passed along as it is (``gpu``, ``versions``, ``clocks``, ``protocol``, …)."""
        return self.content.get(key)

    def shape(self, shape: str) -> ShapeRun:
        return self.shapes.get(shape) or ShapeRun()

    def check(self, shape: str, arm: str) -> ArmCheck:
        return self.shape(shape).backends.get(arm) or ArmCheck()

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
    "verdict": "str", "rounds": "int", "pairs": "int", "iters_rounds": "list[int]", "noise": "float",
    "baseline_rounds_us": "list[float]", "candidate_rounds_us": "list[float]",
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
    "host_bound_baseline": "list[int]", "host_bound_candidate": "list[int]", "calls_rounds": "list[int]",
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


def _receipt_row(value: Any, name: str) -> dict[str, Any]:
    row = _object(value, name)
    out: dict[str, Any] = {}
    for column, kind in RECEIPT_COLUMNS.items():
        default = _MISSING if column in _REQUIRED_COLUMNS else None
        out[column] = _field(row, column, _COLUMN_CHECKS[kind], f"{name}.", default)
    if out["attempt"] < 1:
        raise Invalid(f"{name}.attempt must be at least 1, got {out['attempt']}")
    if out["status"] not in _ROW_STATUS:
        raise Invalid(f"{name}.status must be pass or refused, got {out['status']!r:.40}")
    return out


def _not_null(obj: Mapping[str, Any], keys: Iterable[str], where: str) -> None:
    """Fields that may be absent (a default applies) but never null."""
    for key in keys:
        if key in obj and obj[key] is None:
            raise Invalid(f"{where}{key} must not be null")


def _round_protocol(value: Any, name: str) -> dict[str, Any]:
    """A receipt's protocol: what a retry runs again, so every count and size is bounded here."""
    p, at = _object(value, name), f"{name}."
    iters = _field(p, "iters", _int(2, MAX_ITERS), at, None)
    checks: dict[str, Callable[[Any, str], Any]] = {
        "rounds": _int(1, MAX_ROUNDS), "warmup": _int(1, MAX_ITERS),
        "max_noise": _number(0, 1, open_low=True, open_high=True), "max_iters": _int(iters or 2, MAX_ITERS),
        "hold_us": _number(0, 10_000), "hold": _bool, "lead": _bool, "between": _str, "order": _str, "flush_bytes": _int(1, 1 << 40),
        "graphs": _bool, "sensitivity": _bool, "seed": _int(),
    }  # fmt: skip
    _not_null(p, checks.keys() - {"max_noise", "max_iters", "flush_bytes"}, at)  # null there: "not set"
    for key, check in checks.items():
        _field(p, key, check, at, None)
    return dict(p)


def _round_gates(value: Any, name: str) -> dict[str, Any]:
    g, at = _object(value, name), f"{name}."
    checks: dict[str, Callable[[Any, str], Any]] = {
        "directional_limit": _number(0, open_low=True), "min_clock": _number(0, 1), "parity": _bool,
        "confidence": _number(0, 1, open_low=True, open_high=True), "same_within": _number(0),
    }  # fmt: skip
    _not_null(g, checks.keys(), at)
    for key, check in checks.items():
        _field(g, key, check, at, None)
    return dict(g)


@dataclass(frozen=True)
class ReceiptRecord:
    """receipt.json: ``header`` (what was compared and how), ``summary``, the capture folders, one row per attempt."""

    header: Mapping[str, Any]
    rows: tuple[dict[str, Any], ...]
    captures: tuple[str, ...] = ()
    summary: Mapping[str, Any] = field(default_factory=dict)

    @property
    def protocol(self) -> Mapping[str, Any]:
        return self.header.get("protocol") or {}

    @property
    def gates(self) -> Mapping[str, Any]:
        return self.header.get("gates") or {}

    @property
    def arms(self) -> tuple[str, str]:
        """(baseline, candidate) as the arm texts a retry runs (the labels for receipts written before ``arms``)."""
        arms = self.header.get("arms") or {}
        return arms.get("baseline", self.header["baseline"]), arms.get("candidate", self.header["candidate"])

    @property
    def rounds_done(self) -> int:
        """Captures run so far: the round's, then every retry's (a retry continues the numbering)."""
        return int(self.protocol.get("rounds") or 0) + sum(self.header.get("retry_rounds") or [])

    def to_json(self) -> dict[str, Any]:
        return {"schema": RECEIPT_FORMAT, **self.header, "summary": dict(self.summary),
                "captures": list(self.captures), "rows": list(self.rows)}  # fmt: skip

    @classmethod
    def from_json(cls, content: Mapping[str, Any], path: Path | str = f"{runfolder.RECEIPT}.json") -> ReceiptRecord:
        return _reading(path, "receipt", lambda: cls._parse(content))

    @classmethod
    def _parse(cls, c: Mapping[str, Any]) -> ReceiptRecord:
        _check_schema(c, RECEIPT_FORMAT)
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
        _field(c, "retry_rounds", _list(_int(1, MAX_ROUNDS)), default=None)
        rows = tuple(_field(c, "rows", _list(_receipt_row)))
        captures = tuple(_field(c, "captures", _list(_str), default=[]))
        header = {k: v for k, v in c.items() if k not in ("schema", "summary", "captures", "rows")}
        record = cls(header, rows, captures, _field(c, "summary", _object, default={}))
        if record.rounds_done > MAX_ROUNDS * 10:
            raise Invalid(f"{record.rounds_done} rounds so far: more than a retry may continue")
        return record

    @classmethod
    def read(cls, path: Path) -> ReceiptRecord:
        return cls.from_json(read_object(path, "receipt"), path)


# -- search.json (traceattr sweep) ---------------------------------------------------------------

SEARCH_FORMAT = "traceattr.search/1"
SEARCH = "search.json"  # in a sweep folder, beside one run folder per step (step-1, step-2, …)
# who is really faster at a measured ctx (analysis.bisect.side_of), and what a search concluded (analysis.bisect)
SEARCH_SIDES: tuple[str, ...] = ("below", "above", "same", "ambiguous", "refused")
SEARCH_KINDS: tuple[str, ...] = (
    "measure", "crossover", "tie band", "undecided band", "several crossovers", "no crossover", "budget",
    "resolution", "refused",
)  # fmt: skip
MAX_STEPS = 100  # captures one search may run


def _ctx_pair(value: Any, name: str) -> list[int]:
    pair = _list(_int(1))(value, name)
    if len(pair) != 2 or pair[0] > pair[1]:
        raise Invalid(f"{name} must be [low, high] with low ≤ high, got {value!r:.40}")
    return pair


def _decision(value: Any, name: str) -> dict[str, Any]:
    d, at = _object(value, name), f"{name}."
    _field(d, "kind", _one_of(SEARCH_KINDS), at)
    _field(d, "next_ctx", _int(1), at, None)
    for key in ("bracket", "band"):
        _field(d, key, _ctx_pair, at, None)
    _field(d, "estimate", _int(1), at, None)
    for key in ("half_width", "width"):
        _field(d, key, _number(0, 1), at, None)
    _field(d, "refused", _refusal, at, None)
    _field(d, "crossings", _list(_ctx_pair), at, None)
    _field(d, "ends", _list(_one_of(SEARCH_SIDES)), at, None)
    _field(d, "swapped", _bool, at, None)
    return dict(d)


def _refusal(value: Any, name: str) -> dict[str, Any]:
    r, at = _object(value, name), f"{name}."
    _field(r, "ctx", _int(1), at)
    _field(r, "cause", _str, at, "")
    return dict(r)


def _search_point(value: Any, name: str) -> dict[str, Any]:
    p, at = _object(value, name), f"{name}."
    _field(p, "ctx", _int(1), at)
    _field(p, "shape", _str, at)
    _field(p, "side", _one_of(SEARCH_SIDES), at)
    _field(p, "status", _one_of(_ROW_STATUS), at)
    for key in ("ratio", "low", "high"):
        _field(p, key, _any_number, at, None)
    _field(p, "medians_us", _objects(_any_number), at, None)
    _field(p, "gates", _object, at, None)
    return dict(p)


def _search_step(value: Any, name: str) -> dict[str, Any]:
    s, at = _object(value, name), f"{name}."
    _field(s, "step", _int(1, MAX_STEPS), at)
    _field(s, "folder", _str, at)
    _field(s, "points", _list(_search_point), at)
    _field(s, "decision", _decision, at)
    _field(s, "seconds", _number(0), at, None)
    return dict(s)


@dataclass(frozen=True)
class SearchRecord:
    """search.json of ``traceattr sweep``: what was searched (``header``), each step's captured points with
    their gates and the decision after it, and the ``result`` (None: the search did not finish)."""

    header: Mapping[str, Any]
    steps: tuple[dict[str, Any], ...] = ()
    result: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"schema": SEARCH_FORMAT, **self.header, "steps": list(self.steps),
                "result": None if self.result is None else dict(self.result)}  # fmt: skip

    @property
    def passing_folders(self) -> tuple[str, ...]:
        """The step run folders with at least one point that passed every gate."""
        return tuple(s["folder"] for s in self.steps if any(p["status"] == "pass" for p in s["points"]))

    @classmethod
    def from_json(cls, content: Mapping[str, Any], path: Path | str = SEARCH) -> SearchRecord:
        return _reading(path, "search record", lambda: cls._parse(content))

    @classmethod
    def _parse(cls, c: Mapping[str, Any]) -> SearchRecord:
        _check_schema(c, SEARCH_FORMAT)
        if c.get("command") != "sweep":
            raise Invalid("not a traceattr sweep record")
        _field(c, "family", _str)
        _field(c, "arms", _list(_str))
        _field(c, "ctx_range", _ctx_pair)
        _field(c, "width", _number(0, 1, open_low=True, open_high=True))
        _field(c, "max_steps", _int(1, MAX_STEPS))
        _field(c, "graphs", _bool, default=False)
        steps = tuple(_field(c, "steps", _list(_search_step), default=[]))
        result = _field(c, "result", _decision, default=None)
        header = {k: v for k, v in c.items() if k not in ("schema", "steps", "result")}
        return cls(header, steps, result)

    @classmethod
    def read(cls, path: Path) -> SearchRecord:
        return cls.from_json(read_object(path, "search record"), path)

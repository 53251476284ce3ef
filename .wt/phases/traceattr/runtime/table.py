"""A typed, validating reader of ``traceattr.dispatch/2`` documents, for a decode loop to load.

``traceattr dispatch`` writes the document (:func:`traceattr.present.dispatch.dispatch_table_doc`); this
module reads the part a dispatcher acts on: per family its key (q, heads, batch, KV dtype, page,
pattern, dcp) and its ``dispatch`` segments (``ctx_from`` inclusive, ``ctx_to`` exclusive, ``null`` =
open), plus the mode the table was measured in when the document says so. Everything else in the
document (regret, points, rules) is the table's evidence and is not needed to dispatch.

A document that does not follow the schema raises :class:`DispatchTableError` (a ``ValueError``)
naming the JSON path of the field and the value found, never a ``KeyError`` or ``TypeError``. Pure
Python: no torch, so the reader and its tests run on any machine.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from traceattr.backends.arms import split_spec

SCHEMA_V2 = "traceattr.dispatch/2"  # the same string present.dispatch writes (runtime may not import present)
Mode = Literal["eager", "graphs", "unknown"]
MODES: tuple[Mode, ...] = ("eager", "graphs", "unknown")


class DispatchTableError(ValueError):
    """A dispatch document that a dispatcher cannot load: ``field`` is its JSON path, ``value`` what was there."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"dispatch table: {field} = {_short(value)}: {problem}")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class FamilyKey:
    """What a batch must match for a family's table to apply (the shape without its ctx)."""

    q: int
    heads: int
    batch: int
    kv_dtype: str = "bf16"
    page: int = 64
    pattern: str = "uniform"
    dcp: int = 1


@dataclass(frozen=True)
class Segment:
    """One arm for ctx in ``[ctx_from, ctx_to)``; None is an open end."""

    ctx_from: int | None
    ctx_to: int | None
    arm: str  # the arm label as the table names it (fa3, flashmla, fa3[splits=4])

    def holds(self, ctx: int) -> bool:
        return (self.ctx_from is None or ctx >= self.ctx_from) and (self.ctx_to is None or ctx < self.ctx_to)


@dataclass(frozen=True)
class FamilyTable:
    """A family's segments, contiguous and in ctx order, and the boundaries a lookup bisects."""

    family: str
    key: FamilyKey
    segments: tuple[Segment, ...]
    measured_ctx: tuple[int, ...] = ()

    @property
    def arms(self) -> tuple[str, ...]:
        """The distinct arms the table can pick, in ctx order."""
        return tuple(dict.fromkeys(s.arm for s in self.segments))

    @property
    def bounds(self) -> tuple[int, ...]:
        """The inner boundaries: ``segments[i]`` holds ctx with ``bounds[i-1] <= ctx < bounds[i]``."""
        return tuple(s.ctx_to for s in self.segments[:-1])  # type: ignore[misc]  # checked not None on read

    def arm_for(self, ctx: int) -> str:
        """The arm for a batch whose key ctx is *ctx* (pure Python, a bisect over the boundaries)."""
        return self.segments[bisect.bisect_right(self.bounds, ctx)].arm


@dataclass(frozen=True)
class DispatchTable:
    """A loaded document: its families by key, the mode it was measured in, where it came from."""

    source: str
    mode: Mode
    families: tuple[FamilyTable, ...]

    def family_for(self, key: FamilyKey) -> FamilyTable | None:
        return next((f for f in self.families if f.key == key), None)

    def get(self, key: FamilyKey) -> FamilyTable:
        """The family for *key*; :class:`DispatchTableError` listing the keys the table has otherwise."""
        fam = self.family_for(key)
        if fam is None:
            have = "; ".join(f"{f.family} {f.key}" for f in self.families) or "none"
            raise DispatchTableError("families", key, f"no family has this key (the table has: {have})")
        return fam


def read_table(path: str | Path, *, mode: Mode | None = None) -> DispatchTable:
    """Load a ``traceattr.dispatch/2`` file (see :func:`parse_table`)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DispatchTableError("$", str(path), f"not JSON ({err})") from None
    return parse_table(doc, mode=mode)


def parse_table(doc: object, *, mode: Mode | None = None) -> DispatchTable:
    """A :class:`DispatchTable` from a parsed document.

    The mode is the document's ``mode`` field when it has one (``eager``/``graphs``); else the
    arms' ``[graphs]`` option when every segment of every family carries it (graphs) or none does
    and some point says ``eager``; else ``unknown``. *mode* overrides what the document says, for a
    table whose provenance is known from elsewhere (a README); a document that says one mode and an
    override that says the other is refused.
    """
    root = _mapping(doc, "$")
    schema = root.get("schema")
    if schema != SCHEMA_V2:
        raise DispatchTableError("schema", schema, f"expected {SCHEMA_V2!r}")
    source = root.get("source", "")
    if not isinstance(source, str):
        raise DispatchTableError("source", source, "expected a string")
    fams = _sequence(root.get("families"), "families")
    families = tuple(_family(f, f"families[{i}]") for i, f in enumerate(fams))
    keys: dict[FamilyKey, str] = {}
    for i, fam in enumerate(families):
        if fam.key in keys:
            raise DispatchTableError(f"families[{i}]", fam.family, f"same key as family {keys[fam.key]!r}")
        keys[fam.key] = fam.family
    stated = root.get("mode")
    if stated is not None and stated not in ("eager", "graphs"):
        raise DispatchTableError("mode", stated, "expected 'eager' or 'graphs'")
    found: Mode = stated if stated is not None else _mode_from_arms(families)
    if mode is not None:
        if mode not in MODES:
            raise DispatchTableError("mode (override)", mode, f"expected one of {', '.join(MODES)}")
        if found != "unknown" and mode != found:
            raise DispatchTableError("mode", found, f"the document says {found}, the caller says {mode}")
        found = mode
    return DispatchTable(source, found, families)


def _mode_from_arms(families: Sequence[FamilyTable]) -> Mode:
    flags = [_has_graphs(s.arm) for f in families for s in f.segments]
    if flags and all(flags):
        return "graphs"
    return "unknown"


def _has_graphs(label: str) -> bool:
    parts = split_spec(label)
    return parts is not None and "graphs" in parts[1].split(",")


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DispatchTableError(where, value, "expected an object")
    return value


def _sequence(value: object, where: str) -> Sequence[Any]:
    if not isinstance(value, list):
        raise DispatchTableError(where, value, "expected a list")
    return value


def _int(value: object, where: str, *, minimum: int = 1, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise DispatchTableError(where, value, "expected an integer" + (" or null" if optional else ""))
    if value < minimum:
        raise DispatchTableError(where, value, f"must be ≥ {minimum}")
    return value


_KEY_DEFAULTS = {"kv_dtype": "bf16", "page": 64, "pattern": "uniform", "dcp": 1}
_KV_DTYPES = ("bf16", "fp8")
_PATTERNS = ("uniform", "ragged", "row")


def _family(value: object, where: str) -> FamilyTable:
    fam = _mapping(value, where)
    name = fam.get("family")
    if not isinstance(name, str) or not name:
        raise DispatchTableError(f"{where}.family", name, "expected a family name such as 'q8_ctx*'")
    q, heads, batch = (_int(fam.get(k), f"{where}.{k}") for k in ("q", "heads", "batch"))
    page = _int(fam.get("page", _KEY_DEFAULTS["page"]), f"{where}.page")
    dcp = _int(fam.get("dcp", _KEY_DEFAULTS["dcp"]), f"{where}.dcp")
    kv_dtype = fam.get("kv_dtype", _KEY_DEFAULTS["kv_dtype"])
    if kv_dtype not in _KV_DTYPES:
        raise DispatchTableError(f"{where}.kv_dtype", kv_dtype, f"expected one of {', '.join(_KV_DTYPES)}")
    pattern = fam.get("pattern", _KEY_DEFAULTS["pattern"])
    if pattern not in _PATTERNS:
        raise DispatchTableError(f"{where}.pattern", pattern, f"expected one of {', '.join(_PATTERNS)}")
    key = FamilyKey(q, heads, batch, kv_dtype, page, pattern, dcp)  # type: ignore[arg-type]
    measured = tuple(
        _int(c, f"{where}.measured_ctx[{i}]") for i, c in enumerate(_sequence(fam.get("measured_ctx", []), f"{where}.measured_ctx"))
    )  # fmt: skip
    raw = _sequence(fam.get("dispatch"), f"{where}.dispatch")
    if not raw:
        raise DispatchTableError(f"{where}.dispatch", raw, "a family needs at least one segment")
    segments = tuple(_segment(s, f"{where}.dispatch[{i}]") for i, s in enumerate(raw))
    _check_cover(segments, f"{where}.dispatch")
    return FamilyTable(name, key, segments, measured)  # type: ignore[arg-type]


def _segment(value: object, where: str) -> Segment:
    seg = _mapping(value, where)
    arm = seg.get("backend", seg.get("arm"))
    if not isinstance(arm, str) or any(c.isspace() for c in arm) or split_spec(arm) is None:
        raise DispatchTableError(f"{where}.backend", arm, "expected an arm label such as 'fa3' or 'fa3[splits=4]'")
    lo = _int(seg.get("ctx_from"), f"{where}.ctx_from", optional=True)
    hi = _int(seg.get("ctx_to"), f"{where}.ctx_to", optional=True)
    if lo is not None and hi is not None and hi <= lo:
        raise DispatchTableError(f"{where}.ctx_to", hi, f"must be above ctx_from ({lo})")
    return Segment(lo, hi, arm)


def _check_cover(segments: tuple[Segment, ...], where: str) -> None:
    """Segments must tile all ctx: open below, each ending where the next starts, open above."""
    if segments[0].ctx_from is not None:
        raise DispatchTableError(f"{where}[0].ctx_from", segments[0].ctx_from, "the first segment must start at null")
    if segments[-1].ctx_to is not None:
        last = len(segments) - 1
        raise DispatchTableError(f"{where}[{last}].ctx_to", segments[-1].ctx_to, "the last segment must end at null")
    for i in range(1, len(segments)):
        prev, cur = segments[i - 1], segments[i]
        if prev.ctx_to is None or cur.ctx_from != prev.ctx_to:
            raise DispatchTableError(
                f"{where}[{i}].ctx_from", cur.ctx_from, f"must equal the previous segment's ctx_to ({prev.ctx_to})"
            )


def table_doc(source: str, mode: Mode, families: Sequence[FamilyTable]) -> dict[str, Any]:
    """A minimal ``traceattr.dispatch/2`` document (key and segments, plus ``mode``) that :func:`parse_table`
    reads back: what a table derived on the GPU side (a quick grid) is written as."""
    return {
        "schema": SCHEMA_V2,
        "source": source,
        "mode": mode,
        "families": [
            {
                "family": f.family,
                **{k: getattr(f.key, k) for k in ("q", "heads", "batch", "kv_dtype", "page", "pattern", "dcp")},
                "measured_ctx": list(f.measured_ctx),
                "dispatch": [{"ctx_from": s.ctx_from, "ctx_to": s.ctx_to, "backend": s.arm} for s in f.segments],
            }
            for f in families
        ],
    }

"""How a measured call is named in NVTX: written by the runner, read by analysis; grouping of other names.

One range per call, domain ``traceattr``, message of ``key=value`` words::

    backend=fa3 shape=q8_ctx900k_h16_b1_bf16_p64 arm=A iter=12

nsys shows it as ``traceattr:backend=fa3 shape=… arm=A iter=12``. The
``backend`` word is the arm's label (:mod:`traceattr.backends.arms`: ``fa3``,
``fa3[splits=4]``, ``cand``; never whitespace). The L2 flush before each call
runs in its own ``traceattr:flush`` range (outside the call's), the
``--between flush+ARM`` predecessor call in a ``traceattr:between`` range,
warm-up calls in ``traceattr:warmup …`` ranges. A real DCP rank's call
(``traceattr profile --ranks N``) holds ``dcp attention``, ``dcp all-gather``
and ``dcp merge`` ranges. :class:`CallName` writes the message and
:data:`MESSAGE_PATTERN` reads it; both come from :data:`KEYS`.

Traces other tools wrote name their calls otherwise. A *grouping* is a regex
with named groups ``backend`` and ``shape`` (required), ``iter`` and ``arm``
(optional), matched against each range's message (its text without the
``domain:`` prefix); the presets in :data:`GROUP_PRESETS` cover common
conventions. Their shape is a run of parts of the shape grammar
(:data:`traceattr.core.shapes.SHAPE_PATTERN`), so ``fa3_pertoken_q8_ctx900k_3`` is
backend ``fa3_pertoken``, shape ``q8_ctx900k``, iteration 3, and
``fa2/q8_ctx32768`` has no iteration (the ctx digits stay in the shape).
Pure string code: both the GPU runner and the CPU-only analysis import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceattr.core.errors import TraceattrError
from traceattr.core.shapes import SHAPE_PATTERN

if TYPE_CHECKING:  # the runner imports this module too: it never needs polars for it
    import polars as pl

DOMAIN = "traceattr"
FLUSH = "flush"
BETWEEN = "between"
HOLD = "hold"  # a GPU spin before each group of timed calls, while the host enqueues the group
WARMUP = "warmup"
# an untimed call right after the hold, before a group's timed calls: no timed call is the first after idle
LEAD = "lead"
# inside a call of a real DCP rank (traceattr.runner.ranks): its three phases
DCP_ATTENTION = "dcp attention"
DCP_GATHER = "dcp all-gather"
DCP_MERGE = "dcp merge"
KEYS = ("backend", "shape", "arm", "iter")
_VALUES = {"backend": r"\S+", "shape": r"\S+", "arm": r"\S+", "iter": r"\d+"}
MESSAGE_PATTERN = "^" + " ".join(f"{k}=(?P<{k}>{_VALUES[k]})" for k in KEYS) + "$"
_MESSAGE = re.compile(MESSAGE_PATTERN)


@dataclass(frozen=True)
class CallName:
    backend: str
    shape: str
    arm: str
    iteration: int

    @property
    def message(self) -> str:
        values = {"backend": self.backend, "shape": self.shape, "arm": self.arm, "iter": self.iteration}
        return " ".join(f"{k}={values[k]}" for k in KEYS)


def parse_message(message: str | None) -> CallName | None:
    """The call a range message names, or None for any other range."""
    m = _MESSAGE.match(message or "")
    if m is None:
        return None
    return CallName(m["backend"], m["shape"], m["arm"], int(m["iter"]))


def _separated(sep: str, iter_sep: str | None = None) -> str:
    """``<backend> SEP <shape> [SEP <iter>]``: the backend is everything before the shape (it may hold SEP,
    not whitespace: a name of several words is no backend this can tell, so ``--group`` must say).

    No look-arounds: polars' regex engine (Rust) has none.
    """
    return rf"^(?P<backend>\S+?){sep}(?P<shape>{SHAPE_PATTERN})(?:{iter_sep or sep}(?P<iter>\d+))?$"


_KV_SEP = r"[\s|,;]+"
_KV_VALUE = r"[^\s|,;]+"
# name -> (regex, what it reads). Matched against the message; every one has backend and shape groups.
GROUP_PRESETS: dict[str, tuple[str, str]] = {
    "traceattr": (MESSAGE_PATTERN, "backend=fa3 shape=q8_ctx900k arm=A iter=3 (traceattr profile's own ranges)"),
    "keyvalue": (
        rf"^backend=(?P<backend>{_KV_VALUE}){_KV_SEP}shape=(?P<shape>{_KV_VALUE})"
        rf"(?:{_KV_SEP}arm=(?P<arm>{_KV_VALUE}))?(?:{_KV_SEP}iter=(?P<iter>\d+))?$",
        "backend=fa3|shape=q8_ctx900k[|arm=A][|iter=3], words split by spaces, | , or ;",
    ),
    "slash": (_separated("/", "[/:#]"), "fa3/q8_ctx900k[:3] (or /3, #3)"),
    "pipe": (_separated(r"\|"), "fa3|q8_ctx900k[|3]"),
    "dot": (_separated(r"\."), "fa3.q8_ctx900k[.3]"),
    "underscore": (_separated("_"), "fa3_pertoken_q8_ctx900k[_3]"),
    "separated": (
        _separated(r"[_/|.:#, -]"),
        "any of _ / | . : # , - or a space around the shape: fa3|q8_ctx900k:3, probe:fa2_q1_ctx131072",
    ),
}
# Tried in order when no grouping is given: the first that names at least one range is used.
AUTO = ("traceattr", "keyvalue", "separated")
GROUP_NAMES = ("backend", "shape", "iter", "arm")
_NAMED_GROUP = re.compile(r"\(\?P?<([A-Za-z_]\w*)>")


def group_pattern(group: str) -> str:
    """The regex of a preset name or of a user regex; one-line error when it lacks what grouping needs."""
    if group in GROUP_PRESETS:
        return GROUP_PRESETS[group][0]
    names = set(_NAMED_GROUP.findall(group))
    missing = [g for g in ("backend", "shape") if g not in names]
    if missing:
        presets = ", ".join(GROUP_PRESETS)
        raise TraceattrError(
            f"--group: {group!r} is neither a preset ({presets}) nor a regex with named groups "
            f"(?P<backend>…) and (?P<shape>…) (missing {', '.join(missing)}; iter and arm are optional)"
        )
    return group


def group_fields(pattern: str) -> list[str]:
    """The grouping fields a regex names (backend, shape, and iter/arm where present)."""
    names = set(_NAMED_GROUP.findall(pattern))
    return [g for g in GROUP_NAMES if g in names]


def check_regex(pattern: str | None, option: str = "--match") -> None:
    """A regex polars accepts (its Rust engine is the one that runs it), or a one-line error naming *option*."""
    if pattern is None:
        return
    import polars as pl  # here, not at the top: the GPU runner imports this module without needing it

    try:
        pl.Series([""]).str.contains(pattern)
    except pl.exceptions.PolarsError as err:
        raise TraceattrError(f"{option}: invalid regular expression {pattern!r} ({str(err).splitlines()[0]})") from None


def checked_group(group: str) -> str:
    """The regex of *group* (a preset or a user regex), checked: the named groups grouping needs, and valid."""
    pattern = group_pattern(group)
    check_regex(pattern, "--group")
    return pattern


# Names of ranges other tools repeat, with a per-instance counter the name carries:
# PyTorch's emit_nvtx (", seq = 12", ", op_id = 34") and traceattr's own " arm=A" and " iter=5" (the arm letter
# is the call's place in the ABBA order, not what runs: one backend in two runs is one name).
_INSTANCE_COUNTERS = rf", (?:seq|op_id) = \d+| arm={_VALUES['arm']}| iter={_VALUES['iter']}"
# A series name and its iteration after a separator: "decode:3", "step#3", "probe_3", "warm 3".
_SERIES_ITERATION = r"^(?P<series>.+?)[:#_ ](?P<iter>\d+)$"
# Every run of shape parts in a name, with what delimits it.
_SHAPE_RUNS = rf"(?:^|[^A-Za-z0-9-])({SHAPE_PATTERN})(?:$|[^A-Za-z0-9-])"


def without_counters(names: pl.Expr) -> pl.Expr:
    """Range names without their per-instance counters, so that repeated ranges add up under one name."""
    return names.str.replace_all(_INSTANCE_COUNTERS, "")


def series_and_iteration(names: pl.Expr) -> pl.Expr:
    """A struct of ``series`` (the name before a trailing ``:3``/``#3``/``_3``/`` 3``) and ``iter`` (its digits,
    as text); both null where the name ends in no such iteration."""
    return names.str.extract_groups(_SERIES_ITERATION)


def has_shape_runs(names: pl.Expr) -> pl.Expr:
    """Whether each name holds a run of shape-grammar parts (a match test: cheaper than :func:`shape_runs`)."""
    return names.str.contains(_SHAPE_RUNS)


def shape_runs(names: pl.Expr) -> pl.Expr:
    """The runs of shape-grammar parts in each name, joined by spaces (``fa3_q8_ctx900k_3`` -> ``_q8_ctx900k_``)."""
    return names.str.extract_all(_SHAPE_RUNS).list.join(" ")

"""Options shared by several commands, defined once (as nsys's Option enum and sqlite-utils' bundles do)."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar, get_type_hints

import typer

from traceattr.analysis.bases import BASES
from traceattr.attribution.engine import MODES, Attributing, Attribution
from traceattr.cli.table_options import TableFormat as TableFormat
from traceattr.cli.table_options import WideOpt as WideOpt
from traceattr.core.callnames import check_regex as check_regex  # with the options it checks; defined in core
from traceattr.core.callnames import checked_group
from traceattr.core.errors import TraceattrError
from traceattr.core.protocol import DEFAULT_MAX_ITERS, PRESETS, Gates, Protocol
from traceattr.trace.validate import MAX_MEMORY_BANDWIDTH, MIN_MEMORY_BANDWIDTH

# Exit statuses, one convention for every command (README: exit status): 0 the command answered;
# 1 a bug (a traceback); 2 refused input, or nothing to answer (nothing matched, nothing to compare);
# 128+N stopped by signal N (130: Ctrl-C).
NOTHING_TO_COMPARE = 2

ModeChoice = Enum("ModeChoice", {m: m for m in MODES}, type=str)  # type: ignore[misc]

Basis = Enum("Basis", {b: b for b in BASES}, type=str)  # type: ignore[misc]
TimeOpt = Annotated[
    Basis,  # type: ignore[valid-type]
    typer.Option(
        "--time",
        help="What a call's time is, for every verdict, rule, fit and roofline: "
        + "; ".join(f"{k}: {words[1]}" for k, words in BASES.items())
        + " (a traceattr run folder). A note says when calls hold flush-role kernels or nested ranges.",
    ),
]

TraceArg = Annotated[Path, typer.Argument(help="nsys export (.sqlite), report (.nsys-rep) or traceattr run folder.")]
TracesArg = Annotated[
    list[Path],
    typer.Argument(
        help="nsys exports (.sqlite), nsys reports (.nsys-rep), run folders, folders of them, or quoted glob patterns. "
        "Several traces are attributed in parallel and combined with a `trace` column."
    ),
]
WorkersOpt = Annotated[
    Optional[int],
    typer.Option("--workers", "-j", min=1, help="Local worker processes for many traces (default: one per core)."),
]
DaskOpt = Annotated[
    Optional[str],
    typer.Option(help="Run many traces on this Dask scheduler (tcp://host:8786), or `local` for a local cluster."),
]
ModeOpt = Annotated[
    ModeChoice,  # type: ignore[valid-type]
    typer.Option(
        help="nsys: every enclosing range gets an op (as nsys stats); innermost: each op once, in its deepest range."
    ),
]
DomainOpt = Annotated[Optional[str], typer.Option(help="Only ranges of this NVTX domain.")]
MatchOpt = Annotated[Optional[str], typer.Option(help="Only ranges whose name matches this regex.")]
GroupOpt = Annotated[
    Optional[str],
    typer.Option(
        help="How call names read as backend + shape: a preset (traceattr, keyvalue, slash, pipe, dot, underscore, "
        "separated) or a regex with named groups backend, shape and optionally iter, arm, matched against each "
        "range's message, or, where that reads nothing, its name as nsys shows it (domain:message, e.g. "
        "sweep:fa3|q1_ctx32768|3). Default: the presets traceattr, keyvalue, separated in turn. `traceattr shapes` "
        "lists them."
    ),
]
RulesOpt = Annotated[Optional[Path], typer.Option(help="TOML kernel-role rules tried before the built-in ones.")]


def check_group(group: str | None) -> None:
    """A grouping preset, or a regex polars accepts with the named groups grouping needs; else one line."""
    if group is not None:
        checked_group(group)


def check_selected(att: Attribution | Attributing, domain: str | None, match: str | None) -> None:
    """One line, exit 2, when --domain/--match chose no range: an empty table would read as an answer, while
    ``[unattributed]`` holds every op."""
    if not att.selected or att.ranges["range_id"].is_not_null().any():
        return
    asked = " and ".join(f"{flag} {value!r}" for flag, value in (("--domain", domain), ("--match", match)) if value)
    every = att.trace.ranges
    domains = sorted(d for d in every["domain"].drop_nulls().unique().to_list())
    example = every["name"].drop_nulls().head(1).to_list()
    seen = (f"; domains here: {', '.join(map(repr, domains[:5]))}" if domains else "; no range here has a domain") + (
        f"; a name here reads {example[0][:120]!r}" if example else "; the trace has no NVTX ranges"
    )
    raise TraceattrError(f"{att.meta.path}: no NVTX range matches {asked}{seen}")


def check_bandwidth(tb_per_s: float | None) -> None:
    """--bandwidth (TB/s) within what a GPU can have (the bounds TARGET_INFO_GPU's is held to); else one line:
    1e-300 would print a roofline share of 10^300 %."""
    lo, hi = MIN_MEMORY_BANDWIDTH / 1e12, MAX_MEMORY_BANDWIDTH / 1e12
    if tb_per_s is not None and not (math.isfinite(tb_per_s) and lo <= tb_per_s <= hi):
        raise TraceattrError(f"--bandwidth must be a GPU's memory bandwidth in TB/s, {lo:g} to {hi:g}, got {tb_per_s}")


# -- the measuring protocol's options, made from the records (traceattr.core.protocol) ----------------


@dataclass(frozen=True)
class ProtocolOption:
    """One command-line option that sets a field of :class:`Protocol` or :class:`Gates`.

    Its default is the command's preset value of *field* (``default_of`` turns the field's value into
    the option's, e.g. bytes into MB); an option that is not a field's own spelling (round's hidden
    ``--hold-us``) gives its default explicitly.
    """

    field: str  # the record's field it sets
    param: str  # the parameter's name (what ctx.params and options_given use)
    kind: Any  # the option's value type, as typer reads it
    help: str
    flags: tuple[str, ...] = ()  # () : typer's --param-name
    default_of: Callable[[Any], Any] | None = None  # the record's value → the option's default; None: as is
    default: Any = None  # when no record field gives it (default_of and field unused)
    hidden: bool = False
    gate: bool = False  # a field of Gates, not of Protocol

    def default_value(self, protocol: Protocol, gates: Gates) -> Any:
        if self.field == "":
            return self.default
        value = getattr(gates if self.gate else protocol, self.field)
        return value if self.default_of is None else self.default_of(value)


def _mb(flush_bytes: int | None) -> int | None:
    return None if flush_bytes is None else flush_bytes >> 20


_ITERS_HELP = {
    "profile": "Timed ABBA iterations; every arm runs once per iteration.",
    "round": "ABBA iterations per capture (each arm once per iteration); the minimum.",
    "sweep": "Timed ABBA iterations per step (a minimum with --max-noise).",
}
_WARMUP = "Untimed calls per arm after validation."
_GRAPHS = "Replay each call as a captured CUDA graph."
_FLUSH_MB = "L2 flush buffer in MB (default: 2× L2, at least 128)."
_SEED = "Seed of the random inputs."


def _iters(command: str) -> ProtocolOption:
    return ProtocolOption("iters", "iters", int, _ITERS_HELP[command])


_WARMUP_OPTION = ProtocolOption("warmup", "warmup", int, _WARMUP)


# A command's options in the order --help lists them; a plain name places one of the command's own
# parameters there (profile's --shuffle-pages and --validate sit among the protocol's, as they always did).
PROTOCOL_OPTIONS: dict[str, tuple[ProtocolOption | str, ...]] = {
    "profile": (
        _iters("profile"),
        _WARMUP_OPTION,
        ProtocolOption("max_noise", "max_noise", Optional[float],
                       "Make --iters a minimum: add rounds (abba) until every arm's median is this precise, as a "
                       "fraction (0.005: the 95% interval of the median within ±0.5%)."),
        ProtocolOption("max_iters", "max_iters", Optional[int],
                       f"With --max-noise: never more iterations than this. \\[default: {DEFAULT_MAX_ITERS}]"),
        ProtocolOption("hold_us", "hold_us", float,
                       "µs per call of GPU spin before each group of calls, so the host enqueues the group before the "
                       "GPU reaches it (no call waits for its own launch; traceattr round holds 100)."),
        ProtocolOption("lead", "lead", bool,
                       "Open each group of timed calls with an untimed call of its last arm, so no timed call is the "
                       "first after an idle GPU.", flags=("--lead/--no-lead",)),
        ProtocolOption("graphs", "graphs", bool, _GRAPHS, flags=("--graphs",)),
        "shuffle",
        ProtocolOption("seed", "seed", int, "Seed of the random inputs and of the page shuffle."),
        "validate",
        ProtocolOption("flush_bytes", "flush_mb", Optional[int], _FLUSH_MB, default_of=_mb),
        ProtocolOption("between", "between", str,
                       "What runs before every timed call: flush (the L2 flush), flush+ARM (the flush, then ARM's "
                       "call, so every arm follows the same kernel) or none."),
        ProtocolOption("order", "order", str,
                       "abba: arms interleaved, reversed every other round; blocked: each arm back to back."),
    ),
    "round": (
        _iters("round"),
        ProtocolOption("max_noise", "max_noise", float,
                       "Add iterations (ten at a time) until every arm's median in the capture is this precise: half "
                       "its 95% interval as a fraction (0: exactly --iters)."),
        ProtocolOption("max_iters", "max_iters", int, "Never more ABBA iterations per capture than this."),
        ProtocolOption("hold_us", "hold", bool,
                       "Hold the GPU before each ABBA group until the host has enqueued the whole group (released by "
                       "the host), so no call waits for its own launch.", flags=("--hold/--no-hold",),
                       default_of=bool),
        ProtocolOption("lead", "lead", bool,
                       "Open each ABBA group with an untimed call of its last arm, so no timed call is the first after "
                       "an idle GPU (which ran faster on the H200).", flags=("--lead/--no-lead",)),
        ProtocolOption("", "hold_us", Optional[float], "Deprecated: > 0 is --hold, 0 is --no-hold.",
                       flags=("--hold-us",), hidden=True),
        _WARMUP_OPTION,
        ProtocolOption("graphs", "graphs", bool, _GRAPHS, flags=("--graphs",)),
        ProtocolOption("between", "between", str,
                       "What runs before every call: flush (cold L2), flush+ARM (then one call of ARM), or none."),
        ProtocolOption("flush_bytes", "flush_mb", Optional[int], _FLUSH_MB, default_of=_mb),
        ProtocolOption("sensitivity", "sensitivity", bool,
                       "Also time each row back to back and report how far the ratio moves.",
                       flags=("--sensitivity",)),
        ProtocolOption("directional_limit", "directional_limit", float,
                       "Refuse a row when |ratio(baseline first) − ratio(candidate first)| exceeds this.", gate=True),
        ProtocolOption("min_clock", "min_clock", float,
                       "Refuse a row whose loaded SM clock / max is below this (0: gate off).", gate=True),
        ProtocolOption("parity", "parity", bool,
                       "Gate on output parity (bitwise for arms declared the same program).", gate=True),
        ProtocolOption("same_within", "same_within", float, "'same' when the interval lies within 1 ± this.",
                       gate=True),
        ProtocolOption("confidence", "confidence", float, "Confidence level of the ratio's interval.", gate=True),
        ProtocolOption("seed", "seed", int, _SEED),
    ),
    "sweep": (
        ProtocolOption("graphs", "graphs", bool, "Replay each call as a CUDA graph (a separate answer).",
                       flags=("--graphs",)),
        _iters("sweep"),
        _WARMUP_OPTION,
        ProtocolOption("max_noise", "max_noise", float,
                       "Add rounds until each arm's median is this precise (fraction; 0: exactly --iters)."),
        ProtocolOption("max_iters", "max_iters", int, "With --max-noise: never more iterations than this."),
        ProtocolOption("hold_us", "hold_us", float, "µs of GPU hold per call before each ABBA group."),
        ProtocolOption("between", "between", str, "What runs before every timed call: flush, flush+ARM or none."),
        ProtocolOption("seed", "seed", int, _SEED),
    ),
}  # fmt: skip
# Fields a command has no option for: it measures them one way (a round is ABBA, its back-to-back capture
# is --sensitivity; a sweep step leads, flushes 2× L2 and has no back-to-back capture; profile has no rounds).
FIXED_FIELDS: dict[str, frozenset[str]] = {
    "profile": frozenset({"sensitivity"}),
    "round": frozenset({"order"}),
    "sweep": frozenset({"lead", "flush_bytes", "order", "sensitivity"}),
}


def _noise(values: Mapping[str, Any]) -> dict[str, Any]:
    """round and sweep: --max-noise 0 times exactly --iters (and --max-iters then means nothing)."""
    noise = values["max_noise"]
    return {"max_noise": noise or None, "max_iters": values["max_iters"] if noise else None}


def protocol_of(command: str, values: Mapping[str, Any]) -> tuple[Protocol, Gates]:
    """The protocol and gates the command's options say (*values*: ``ctx.params``-style, by parameter name);
    a gate out of range is one line."""
    return protocol_from(command, values), gates_of(command, values)


def protocol_from(command: str, values: Mapping[str, Any]) -> Protocol:
    """The protocol the command's options say: its preset with each option's field (MB as bytes; round and
    sweep: --max-noise 0 is off; round: --hold, or the old --hold-us > 0)."""
    preset = PRESETS[command]
    fields_set = {o.field: values[o.param] for o in options_of(command) if o.field and not o.gate}
    if command == "profile":
        mb = values["flush_mb"]
        fields_set["flush_bytes"] = mb * (1 << 20) if mb is not None else None
        return replace(preset, **fields_set)
    fields_set.update(_noise(values))
    if command == "sweep":
        return replace(preset, **fields_set)
    mb, hold_us = values["flush_mb"], values["hold_us"]
    fields_set["flush_bytes"] = mb * (1 << 20) if mb else None
    return replace(preset, **fields_set).held(values["hold"] if hold_us is None else hold_us > 0)


def gates_of(command: str, values: Mapping[str, Any]) -> Gates:
    """The gates the command's options say; one line when one is out of range."""
    try:
        return Gates(**{o.field: values[o.param] for o in options_of(command) if o.gate})
    except ValueError as err:
        raise TraceattrError(str(err)) from None


# what a command with gate options receives as ``gates``: the gates, made (and checked) when it asks, so
# that its own refusals (round: --retry with a gate, a missing --rows) come first, as they always did
GatesOption = Callable[[], Gates]


def options_of(command: str) -> tuple[ProtocolOption, ...]:
    """The protocol's and gates' options of *command*."""
    return tuple(o for o in PROTOCOL_OPTIONS[command] if isinstance(o, ProtocolOption))


F = TypeVar("F", bound=Callable[..., Any])


def protocol_options(command: str) -> Callable[[F], F]:
    """A decorator (sqlite-utils' option bundles): the command's ``protocol`` parameter (and ``gates``, where it
    has one) becomes the options of :data:`PROTOCOL_OPTIONS`, their defaults the command's preset; the
    function is called with the :class:`Protocol` they make and, for ``gates``, a :data:`GatesOption`."""
    options = options_of(command)
    preset, gates_default = PRESETS[command], Gates()

    def decorate(func: F) -> F:
        hints = get_type_hints(func, include_extras=True)
        own = {p.name: p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints[p.name])
               for p in inspect.signature(func).parameters.values() if p.name not in ("protocol", "gates")}  # fmt: skip
        made = [
            own.pop(o) if isinstance(o, str) else inspect.Parameter(
                o.param, inspect.Parameter.KEYWORD_ONLY, default=o.default_value(preset, gates_default),
                annotation=Annotated[o.kind, typer.Option(*o.flags, help=o.help, hidden=o.hidden)])
            for o in PROTOCOL_OPTIONS[command]
        ]  # fmt: skip
        params: list[inspect.Parameter] = []
        for name in inspect.signature(func).parameters:
            if name == "protocol":
                params += made
            elif name in own:
                params.append(own[name])
        wants_gates = "gates" in hints

        @functools.wraps(func)
        def command_function(**kwargs: Any) -> Any:
            values = {o.param: kwargs.pop(o.param) for o in options}
            gates = functools.partial(gates_of, command, values)
            return func(**kwargs, protocol=protocol_from(command, values), **({"gates": gates} if wants_gates else {}))

        command_function.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command_function.__annotations__ = {p.name: p.annotation for p in params}
        return command_function  # type: ignore[return-value]

    return decorate

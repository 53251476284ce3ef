"""``traceattr decode``: fixed arms and a dispatcher replayed as CUDA graphs along a decode trajectory.

One call of :func:`run_decode` on a GPU: static inputs for the longest ctx, one graph per (arm,
batch) for every fixed arm and for the dispatcher's table, optionally a quick grid first that
derives the table (its points are not the trajectory's), then the trajectory timed (ABBA iterations,
flush before each call, CUDA events, NVTX ranges), every contender's output at every step compared
bitwise to the chosen arm's eager call (batch 1), the dispatcher's host time split per step with N
layers per plan, serialized and pipelined; the receipt (JSON + markdown) written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from traceattr.core.errors import TraceattrError
from traceattr.jobs.decode_summary import TrajectorySummary, derive_family, summarize
from traceattr.runtime.select import RULES, Rule
from traceattr.runtime.table import FamilyKey, FamilyTable, Mode, parse_table, read_table, table_doc
from traceattr.runtime.trajectory import Step, grow, key_ctx_of, mix, mixed_q, read_seq_lens

SCHEMA = "traceattr.decode/1"
DISPATCHER = "dispatch"


@dataclass(frozen=True)
class DecodeConfig:
    q: int
    heads: int = 16
    batch: int = 1
    start: int = 8192
    stop: int = 900_000
    steps: int = 40
    iters: int = 10  # timed replays of every contender per step (ABBA iterations)
    arms: tuple[str, ...] = ("fa3", "flashmla")
    table: str | None = None  # a traceattr.dispatch/2 file; None: derive one from a grid first
    table_mode: Mode | None = None  # what the table's mode is, when the document does not say
    allow_other_mode: bool = False
    grid: int = 10  # grid points (log-spaced over [start, stop], offset from the trajectory's) when deriving
    capture_ctx: int = 8192
    layers: tuple[int, ...] = (1, 61)  # replays per plan in the host profile (61: DeepSeek-V3's layers)
    flush_bytes: int = 256 << 20
    verify: bool = True
    seed: int = 0
    trajectory: str = "grow"  # grow: every request at the step's ctx, log-spaced; mix: ragged, log-uniform per request
    rules: tuple[Rule, ...] = ("max",)  # one dispatcher per rule; the first is the receipt's "dispatch"
    mix_q: tuple[int, ...] = ()  # trajectory mixq: the q of each step drawn from these (equal weights), batch 1
    seq_lens: str | None = None  # trajectory file: the batches' file (config_for_file sets batch, start, stop, steps)

    def __post_init__(self) -> None:
        if self.trajectory not in ("grow", "mix", "mixq", "file"):
            raise TraceattrError(f"trajectory must be grow, mix, mixq or file, got {self.trajectory!r}")
        if (self.trajectory == "file") != (self.seq_lens is not None):
            raise TraceattrError("the file trajectory and seq_lens (its file) go together")
        if (self.trajectory == "mixq") != bool(self.mix_q):
            raise TraceattrError("the mixq trajectory and mix_q (its q values) go together")
        if self.mix_q and (self.batch != 1 or self.table is None or len(self.rules) != 1):
            raise TraceattrError("mixq runs batch 1, one rule, and needs a table holding every q's family")
        bad = [r for r in self.rules if r not in RULES]
        if bad or not self.rules:
            raise TraceattrError(f"rules must be among {', '.join(RULES)}, got {', '.join(self.rules) or 'none'}")

    @property
    def key(self) -> FamilyKey:
        return FamilyKey(self.q, self.heads, self.batch)

    @property
    def family(self) -> str:
        return (
            f"q{self.q}_ctx*"
            + (f"_h{self.heads}" if self.heads != 16 else "")
            + (f"_b{self.batch}" if self.batch != 1 else "")
        )


@dataclass
class DecodeResult:
    config: DecodeConfig
    table_source: str
    table_doc: dict[str, Any]
    summary: TrajectorySummary
    others: dict[str, TrajectorySummary]  # the dispatchers of the other rules, by label
    graphs: dict[str, int]  # contender -> graphs it holds
    memory: dict[str, dict[str, dict[str, int]]]  # contender -> arm -> footprint bytes
    host: list[dict[str, float]]
    equal: dict[str, list[bool]]
    steps: list[tuple[int, ...]]
    grid: dict[str, Any] | None
    times_us: dict[str, list[list[float]]]
    wall_s: float
    device: dict[str, Any] = field(default_factory=dict)


def file_steps(cfg: DecodeConfig) -> tuple[Step, ...]:
    """The file trajectory's batches (:func:`~traceattr.runtime.trajectory.read_seq_lens`), checked against *cfg*:
    the file is read again when the run starts, and one that changed since the config was made is refused."""
    assert cfg.seq_lens is not None
    steps = read_seq_lens(cfg.seq_lens)
    if (len(steps[0]), min(map(min, steps)), max(map(max, steps)), len(steps)) != (
        cfg.batch, cfg.start, cfg.stop, cfg.steps):  # fmt: skip
        raise TraceattrError(f"{cfg.seq_lens}: changed since the run was configured")
    return steps


def config_for_file(path: str, **given: Any) -> DecodeConfig:
    """The config of a file trajectory: batch, ctx range and step count are the file's (*given*: the rest).
    A ``batch`` given that is not the file's is refused; without a table the grid needs a ctx range."""
    steps = read_seq_lens(path)
    batch = len(steps[0])
    if given.pop("batch", batch) not in (1, batch):  # 1: the option's default, i.e. not given
        raise TraceattrError(f"{path}: its batches hold {batch} request(s): drop --batch or make it {batch}")
    lo, hi = min(map(min, steps)), max(map(max, steps))
    if given.get("table") is None and lo == hi:
        raise TraceattrError(f"{path}: every seq_len is {lo:,}: a grid needs a ctx range (give --table)")
    return DecodeConfig(**given, batch=batch, start=lo, stop=hi, steps=len(steps), trajectory="file", seq_lens=path)


def dispatcher_label(rule: Rule, rules: Sequence[Rule]) -> str:
    """``dispatch`` for the first rule, ``dispatch-<rule>`` for the others."""
    return DISPATCHER if rule == rules[0] else f"{DISPATCHER}-{rule}"


def _load_table(cfg: DecodeConfig) -> tuple[FamilyTable, dict[str, Any], str]:
    from traceattr.runtime.dispatcher import family_for

    if cfg.table is None:
        raise TraceattrError("no table given and no grid derived")
    table = read_table(cfg.table, mode=cfg.table_mode)
    fam = family_for(table, cfg.key, mode="graphs", allow_other_mode=cfg.allow_other_mode)
    doc = table_doc(table.source, table.mode, [fam])
    return fam, doc, f"{cfg.table} ({table.mode}; family {fam.family})"


def run_decode(cfg: DecodeConfig, log: Any = print) -> DecodeResult:
    """Everything in the module doc, on the current CUDA device."""
    if cfg.mix_q:
        return _run_mixed_q(cfg, log)
    from traceattr.runner.flush import Flush
    from traceattr.runtime.build import build_dispatcher, fixed_table
    from traceattr.runtime.graphs import StaticInputs
    from traceattr.runtime.measure import bitwise_equal, device_record, eager_output, host_profile, time_trajectory
    from traceattr.runtime.metadata import SlotLayout

    t0 = time.perf_counter()
    layout = SlotLayout.for_max_ctx(cfg.batch, cfg.q, 64, cfg.stop)
    inputs = StaticInputs.random(layout, cfg.heads, seed=cfg.seed)
    flush = Flush(cfg.flush_bytes)
    capture = [cfg.capture_ctx] * cfg.batch
    fixed = {}
    memory: dict[str, dict[str, dict[str, int]]] = {}
    base = FamilyTable(cfg.family, cfg.key, (), ())
    for arm in cfg.arms:
        d, fp = build_dispatcher(fixed_table(base, arm), inputs, capture)
        fixed[arm] = d
        memory[arm] = {k: asdict(v) for k, v in fp.items()}
        log(f"captured {arm}: {fp[arm]}")
    grid_record = None
    if cfg.table is None:
        steps = grow(cfg.start, cfg.stop, cfg.grid * 2 + 1, batch=cfg.batch)[1::2]  # between the trajectory's ends
        log(f"grid for the table: {[s[0] for s in steps]}")
        g = time_trajectory(fixed, steps, iters=cfg.iters, flush=flush.run)
        med = {a: [sorted(r)[len(r) // 2] for r in g.times_us[a]] for a in cfg.arms}
        fam = derive_family(cfg.family, cfg.key, key_ctx_of(steps), med)
        doc = table_doc(f"quick grid of {len(steps)} ctx in this run (graphs, {cfg.iters} iterations)", "graphs", [fam])
        fam = parse_table(doc).get(cfg.key)  # the derived table goes through the reader like any other
        source = doc["source"]
        grid_record = {"ctx": key_ctx_of(steps), "median_us": med}
    else:
        fam, doc, source = _load_table(cfg)
    log(f"table: {source}: " + ", ".join(f"{s.arm} [{s.ctx_from}, {s.ctx_to})" for s in fam.segments))
    dispatchers = {}
    for rule in cfg.rules:
        label = dispatcher_label(rule, cfg.rules)
        dispatchers[label], fp = build_dispatcher(fam, inputs, capture, rule=rule)
        memory[label] = {k: asdict(v) for k, v in fp.items()}
    disp = dispatchers[DISPATCHER]
    contenders = {**fixed, **dispatchers}
    traj = trajectory_of(cfg)

    def check(arm: str, step: tuple[int, ...], out: Any) -> bool:
        return bitwise_equal(out, eager_output(arm, inputs, step))

    run = time_trajectory(contenders, traj, iters=cfg.iters, flush=flush.run,
                          check=check if cfg.verify and cfg.batch == 1 else None)  # fmt: skip
    summary, *rest = (summarize(run.times_us, tuple(cfg.arms), label, run.chosen[label], key_ctx_of(traj), seed=cfg.seed)
                      for label in dispatchers)  # fmt: skip
    others = dict(zip(list(dispatchers)[1:], rest, strict=True))
    host = []
    for layers in cfg.layers:
        hp = host_profile(disp, traj, layers=layers)
        host.append(asdict(hp))
        log(f"host, {layers} layer(s)/plan: {hp}")
    device = device_record()
    return DecodeResult(
        config=cfg, table_source=source, table_doc=doc, summary=summary, others=others,
        graphs={label: d.graphs for label, d in contenders.items()}, memory=memory, host=host,
        equal=run.equal, steps=list(traj), grid=grid_record, times_us=run.times_us, wall_s=time.perf_counter() - t0, device=device,
    )  # fmt: skip


def trajectory_of(cfg: DecodeConfig) -> tuple[Step, ...]:
    """The steps of a grow, mix or file trajectory (mixq: :func:`_run_mixed_q`)."""
    if cfg.trajectory == "grow":
        return grow(cfg.start, cfg.stop, cfg.steps, batch=cfg.batch)
    if cfg.trajectory == "file":
        return file_steps(cfg)
    return mix(cfg.start, cfg.stop, cfg.steps, batch=cfg.batch, seed=cfg.seed)


def _run_mixed_q(cfg: DecodeConfig, log: Any) -> DecodeResult:
    """The mixq trajectory: per q its own inputs, fixed arms and dispatcher (graphs), the table's family for
    each q; the contenders route each step ``(q, ctx)`` to their q (:class:`traceattr.runtime.dispatcher.ByQuery`)."""
    from traceattr.runner.flush import Flush
    from traceattr.runtime.build import build_dispatcher, fixed_table
    from traceattr.runtime.dispatcher import ByQuery, family_for
    from traceattr.runtime.graphs import StaticInputs
    from traceattr.runtime.measure import bitwise_equal, device_record, eager_output, host_profile, time_trajectory
    from traceattr.runtime.metadata import SlotLayout

    t0 = time.perf_counter()
    assert cfg.table is not None  # __post_init__
    table = read_table(cfg.table, mode=cfg.table_mode)
    flush = Flush(cfg.flush_bytes)
    inputs, fams, fixed, disp = {}, {}, {a: {} for a in cfg.arms}, {}
    memory: dict[str, dict[str, dict[str, int]]] = {a: {} for a in (*cfg.arms, DISPATCHER)}
    for q in cfg.mix_q:
        key = FamilyKey(q, cfg.heads, 1)
        fams[q] = family_for(table, key, mode="graphs", allow_other_mode=cfg.allow_other_mode)
        inputs[q] = StaticInputs.random(SlotLayout.for_max_ctx(1, q, 64, cfg.stop), cfg.heads, seed=cfg.seed)
        for arm in cfg.arms:
            fixed[arm][q], fp = build_dispatcher(fixed_table(fams[q], arm), inputs[q], [cfg.capture_ctx])
            memory[arm].update({f"q{q} {k}": asdict(v) for k, v in fp.items()})
        disp[q], fp = build_dispatcher(fams[q], inputs[q], [cfg.capture_ctx])
        memory[DISPATCHER].update({f"q{q} {k}": asdict(v) for k, v in fp.items()})
        log(
            f"q{q}: table {fams[q].family}: "
            + ", ".join(f"{s.arm} [{s.ctx_from}, {s.ctx_to})" for s in fams[q].segments)
        )
    contenders = {**{a: ByQuery(fixed[a]) for a in cfg.arms}, DISPATCHER: ByQuery(disp)}
    traj = mixed_q(cfg.mix_q, cfg.start, cfg.stop, cfg.steps, seed=cfg.seed)

    def check(arm: str, step: tuple[int, ...], out: Any) -> bool:
        return bitwise_equal(out, eager_output(arm, inputs[step[0]], step[1:]))

    run = time_trajectory(contenders, traj, iters=cfg.iters, flush=flush.run, check=check if cfg.verify else None)
    ctx = [s[1] for s in traj]
    summary = summarize(run.times_us, tuple(cfg.arms), DISPATCHER, run.chosen[DISPATCHER], ctx, seed=cfg.seed)
    host = []
    for layers in cfg.layers:
        hp = host_profile(contenders[DISPATCHER], traj, layers=layers)
        host.append(asdict(hp))
        log(f"host, {layers} layer(s)/plan: {hp}")
    doc = table_doc(table.source, table.mode, [fams[q] for q in cfg.mix_q])
    source = f"{cfg.table} ({table.mode}; families " + ", ".join(fams[q].family for q in cfg.mix_q) + ")"
    return DecodeResult(
        config=cfg, table_source=source, table_doc=doc, summary=summary, others={},
        graphs={label: d.graphs for label, d in contenders.items()}, memory=memory, host=host, equal=run.equal,
        steps=list(traj), grid=None, times_us=run.times_us, wall_s=time.perf_counter() - t0, device=device_record(),
    )  # fmt: skip


# -- receipts -------------------------------------------------------------------------------------


def result_json(r: DecodeResult) -> dict[str, Any]:
    s = r.summary
    return {
        "schema": SCHEMA,
        "config": asdict(r.config),
        "device": r.device,
        "table": {"source": r.table_source, "doc": r.table_doc},
        "grid": r.grid,
        "summary": {
            "totals_us": {k: asdict(v) for k, v in s.totals.items()},
            "oracle_us": asdict(s.oracle),
            "best_fixed": s.best_fixed,
            "gain_over_best_fixed": asdict(s.gain),
            "gain_over": {a: asdict(v) for a, v in s.gain_vs.items()},
            "regret_vs_oracle": asdict(s.regret),
            "modelled_regret": s.modelled_regret,
            "switches": s.switches,
            "right_steps": s.right,
            "steps": len(s.ctx),
        },
        "other_rules": {
            label: {
                "total_us": asdict(o.totals[label]),
                "gain_over_best_fixed": asdict(o.gain),
                "regret_vs_oracle": asdict(o.regret),
                "switches": o.switches,
                "right_steps": o.right,
            }
            for label, o in r.others.items()
        },
        "steps": [list(step) for step in r.steps],
        "per_step": [
            {
                "ctx": c,
                "chosen": s.chosen[i],
                "fastest": s.fastest[i],
                **{f"{k}_us": v[i] for k, v in s.medians.items()},
            }
            for i, c in enumerate(s.ctx)
        ],
        "bitwise_equal_to_eager": {k: {"equal": sum(v), "steps": len(v)} for k, v in r.equal.items()},
        "graphs": r.graphs,
        "memory_bytes": r.memory,
        "host": r.host,
        "times_us": r.times_us,
        "wall_s": r.wall_s,
    }


def contender_memory_mib(r: DecodeResult, label: str) -> float:
    """A contender's graph memory in MiB: torch's reserved bytes plus what the driver took beyond them, per arm."""
    return sum(fp["reserved_bytes"] + max(fp["driver_bytes"], 0) for fp in r.memory[label].values()) / 2**20


def _iv(v: Any, scale: float = 1.0, unit: str = "") -> str:
    return f"{v.value * scale:,.1f}{unit} [{v.lo * scale:,.1f}, {v.hi * scale:,.1f}]"


def _pct(v: Any) -> str:
    return f"{v.value:+.2%} [{v.lo:+.2%}, {v.hi:+.2%}]"


def result_markdown(r: DecodeResult) -> str:
    s, c = r.summary, r.config
    disp_total = s.totals[DISPATCHER]
    lines = [
        f"# Decode trajectory `{c.trajectory}`: q{c.q} h{c.heads} b{c.batch}, ctx {c.start:,} → {c.stop:,}, {len(s.ctx)} steps "
        + (
            "(log-spaced, every request at the step's ctx)"
            if c.trajectory == "grow"
            else f"(one request a step, q drawn from {', '.join(map(str, c.mix_q))} with equal weights, ctx "
            f"log-uniform, seed {c.seed}; the title's q is not used)"
            if c.trajectory == "mixq"
            else f"(batches of seq_lens from `{c.seq_lens}`, one a line; the ctx column is the longest request)"
            if c.trajectory == "file"
            else f"(each request's ctx log-uniform in the range, seed {c.seed}; the ctx column is the longest request)"
        ),
        "",
        f"**Dispatcher {disp_total.value / 1e3:,.3f} ms** per pass; best fixed arm **{s.best_fixed}** "
        f"{s.totals[s.best_fixed].value / 1e3:,.3f} ms; **gain {_pct(s.gain)}**; regret vs the per-step oracle "
        f"**{_pct(s.regret)}** (its choices alone, from the fixed arms' medians: {s.modelled_regret:+.2%}); "
        f"{s.switches} switch(es); chose the oracle's arm at {s.right}/{len(s.ctx)} steps.",
        "",
        "Gain over each fixed arm (1 − dispatcher / arm, 95%): "
        + "; ".join(f"{a} {_pct(v)}" for a, v in s.gain_vs.items()),
        "",
        f"- device: {r.device.get('name')}, torch {r.device.get('torch')}, CUDA {r.device.get('cuda')}, "
        f"flashinfer {r.device.get('flashinfer')}, sgl-flash-mla {r.device.get('flash_mla')}",
        f"- table: {r.table_source}",
        f"- protocol: every contender graph-replayed, {c.iters} iterations per step (order reversed every other "
        f"iteration), {c.flush_bytes >> 20} MiB fill + evict flush before each call, CUDA events around the replay; "
        f"graphs captured at ctx {c.capture_ctx:,}; totals = Σ over steps of the median over iterations; "
        "intervals: 95% percentile bootstrap over iterations (scipy), contenders paired",
        "",
        "| contender | total GPU µs per pass [95%] | graphs | memory (MiB, reserved + driver) |",
        "|---|---|---|---|",
    ]
    for label, tot in s.totals.items():
        lines.append(f"| {label} | {_iv(tot)} | {r.graphs[label]} | {contender_memory_mib(r, label):,.0f} |")
    lines.append(f"| oracle (fastest fixed arm per step) | {_iv(s.oracle)} | | |")
    for label, o in r.others.items():
        lines += ["", f"Rule `{label.split('-', 1)[1]}` (`{label}`, the same table): {o.totals[label].value / 1e3:,.3f} ms, "
                  f"gain {_pct(o.gain)}, regret {_pct(o.regret)}, {o.switches} switch(es), the oracle's arm at "
                  f"{o.right}/{len(o.ctx)} steps."]  # fmt: skip
    if any(r.equal.values()):
        lines += [
            "",
            "Bitwise equality of each contender's replayed output with the chosen arm's eager call, per step:",
            "",
        ]
    else:
        why = (
            "--no-verify" if c.batch == 1 else f"batch {c.batch}: the eager layout places pages unlike the slot layout"
        )
        lines += ["", f"No bitwise check in this run ({why})."]
    for label, eq in r.equal.items():
        if eq:
            lines.append(f"- {label}: {sum(eq)}/{len(eq)} steps equal")
    if r.grid is not None:
        lines += ["", "The table was derived in this run from a quick grid (fixed arms only, same protocol) at ctx "
                  + ", ".join(f"{x:,}" for x in r.grid["ctx"]) + "; the trajectory's steps are other ctx."]  # fmt: skip
    lines += ["", "Host time per step of the dispatcher (µs; choose, re-plan and launch are medians, the rest means "
              "per step; pipelined = prepare of step k+1 while the GPU runs step k, one sync at the end):", "",
              "| layers per plan | choose | re-plan (per arm) | launch (all replays) | host total | GPU | serialized wall "
              "| pipelined wall | choose() alone, ns |",
              "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for h in r.host:
        replan = ", ".join(f"{a} {v:.0f}" for a, v in h["replan_us"].items())
        lines.append(f"| {h['layers']} | {h['choose_us']:.2f} | {replan} | {h['launch_us']:.1f} | {h['host_mean_us']:.0f} | "
                     f"{h['gpu_mean_us']:.0f} | {h['serial_wall_mean_us']:.0f} | {h['pipelined_wall_mean_us']:.0f} | "
                     f"{h['choose_loop_ns']:.0f} |")  # fmt: skip
    lines += ["", "Per step (medians over iterations, µs):", "",
              "| ctx | " + " | ".join(s.medians) + " | chosen | fastest |", "|---" * (len(s.medians) + 3) + "|"]  # fmt: skip
    for i, ctx in enumerate(s.ctx):
        cells = " | ".join(f"{s.medians[k][i]:.1f}" for k in s.medians)
        where = f"q{r.steps[i][0]} {ctx:,}" if c.mix_q else f"{ctx:,}"
        lines.append(f"| {where} | {cells} | {s.chosen[i]} | {s.fastest[i]} |")
    return "\n".join(lines) + "\n"


def result_from_json(doc: dict[str, Any]) -> DecodeResult:
    """A receipt's :class:`DecodeResult` again, from its JSON: the summaries recomputed from the raw times
    (the same seed gives the same intervals) and checked against the stored ones, the other rules' choices
    replayed from the stored table and steps. Re-renders a receipt with a newer markdown writer."""
    if doc.get("schema") != SCHEMA:
        raise TraceattrError(f"not a {SCHEMA} receipt: schema {doc.get('schema')!r}")
    from traceattr.runtime.select import key_ctx

    raw = dict(doc["config"])
    if "rounds" in raw:  # receipts written before the field was named for what it counts
        raw["iters"] = raw.pop("rounds")
    cfg = DecodeConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
    table = parse_table(doc["table"]["doc"])
    steps = [tuple(s) for s in doc["steps"]]
    times = doc["times_us"]
    if cfg.mix_q:  # steps (q, ctx): each looked up in its q's family
        ctx = [s[1] for s in steps]
        fams = {q: table.get(FamilyKey(q, cfg.heads, 1)) for q in cfg.mix_q}
        chosen = {DISPATCHER: [fams[s[0]].arm_for(s[1]) for s in steps]}
    else:
        ctx = key_ctx_of(steps)
        fam = table.get(cfg.key)
        chosen = {
            dispatcher_label(rule, cfg.rules): [fam.arm_for(key_ctx(s, rule)) for s in steps] for rule in cfg.rules
        }
    stored = [p["chosen"] for p in doc["per_step"]]
    if chosen[DISPATCHER] != stored:
        raise TraceattrError("the stored table and steps do not give the receipt's choices")
    sums = {label: summarize(times, cfg.arms, label, picks, ctx, seed=cfg.seed) for label, picks in chosen.items()}
    summary = sums.pop(DISPATCHER)
    want = doc["summary"]["totals_us"][DISPATCHER]["value"]
    if abs(summary.totals[DISPATCHER].value - want) > 1e-6 * want:
        raise TraceattrError(f"recomputed total {summary.totals[DISPATCHER].value} differs from the stored {want}")
    equal = {
        k: [True] * v["equal"] + [False] * (v["steps"] - v["equal"]) for k, v in doc["bitwise_equal_to_eager"].items()
    }
    return DecodeResult(
        config=cfg, table_source=doc["table"]["source"], table_doc=doc["table"]["doc"], summary=summary, others=sums,
        graphs=doc["graphs"], memory=doc["memory_bytes"], host=doc["host"], equal=equal, steps=steps, grid=doc["grid"],
        times_us=times, wall_s=doc["wall_s"], device=doc["device"],
    )  # fmt: skip


def write_receipts(r: DecodeResult, out: Path, name: str) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    jpath, mpath = out / f"{name}.json", out / f"{name}.md"
    jpath.write_text(json.dumps(result_json(r), indent=1) + "\n", encoding="utf-8")
    mpath.write_text(result_markdown(r), encoding="utf-8")
    return jpath, mpath


def parse_arms_text(arms: Sequence[str]) -> tuple[str, ...]:
    from traceattr.backends.arms import parse_arms

    return tuple(a.label for a in parse_arms(arms))

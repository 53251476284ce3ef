"""``traceattr decode``: a dispatcher against fixed arms along a decode trajectory, all graph-replayed (GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from traceattr.cli import app


@app.command("decode")
def decode_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the receipt (NAME.json and NAME.md).")],
    q: Annotated[
        Optional[int], typer.Option("--q", help="Query tokens per request (1 = plain decode, >1 = MTP verify).")
    ] = None,
    mix_q: Annotated[
        Optional[list[int]],
        typer.Option("--mix-q", help="The mixq trajectory's q values (repeat), drawn with equal weights."),
    ] = None,
    arm: Annotated[
        Optional[list[str]], typer.Option("--arm", "-a", help="A fixed arm (repeat): fa3, flashmla, fa3\\[splits=4].")
    ] = None,
    table: Annotated[
        Optional[Path],
        typer.Option(
            "--table", help="The dispatcher's traceattr.dispatch/2 table; without it, derived from a quick grid first."
        ),
    ] = None,
    table_mode: Annotated[
        Optional[str],
        typer.Option("--table-mode", help="The table's mode (eager or graphs) when the document does not say."),
    ] = None,
    allow_other_mode: Annotated[
        bool,
        typer.Option("--allow-other-mode", help="Load a table measured in another mode (eager) into graphs anyway."),
    ] = False,
    heads: Annotated[int, typer.Option("--heads", help="Query heads.")] = 16,
    batch: Annotated[int, typer.Option("--batch", help="Requests per step (every request at the step's ctx).")] = 1,
    start: Annotated[int, typer.Option("--from", help="First ctx of the grow trajectory.")] = 8192,
    stop: Annotated[int, typer.Option("--to", help="Last ctx of the grow trajectory.")] = 900_000,
    steps: Annotated[int, typer.Option("--steps", help="Log-spaced steps from --from to --to.")] = 40,
    iters: Annotated[
        int,
        typer.Option(
            "--iters", "--rounds", help="Timed replays per contender and step, ABBA order (--rounds: its old name)."
        ),
    ] = 10,
    grid: Annotated[int, typer.Option("--grid", help="Grid points for a derived table (no --table).")] = 10,
    name: Annotated[str, typer.Option("--name", help="Receipt file name stem.")] = "decode",
    trajectory: Annotated[
        str,
        typer.Option(
            "--trajectory",
            help="grow (every request at the step's ctx), mix (ragged, log-uniform), mixq (--mix-q) or file "
            "(--seq-lens).",
        ),
    ] = "grow",
    seq_lens: Annotated[
        Optional[Path],
        typer.Option(
            "--seq-lens",
            help="The file trajectory's batches (a serving log): one batch a line, seq_lens as whole numbers "
            "separated by blanks or commas, # comments; every line one batch size. Batch, ctx range and steps "
            "are the file's (--from/--to/--steps are not used).",
        ),
    ] = None,
    rule: Annotated[
        Optional[list[str]], typer.Option("--rule", help="Batch key rule, max or mean (repeat: one dispatcher each).")
    ] = None,
    no_verify: Annotated[
        bool, typer.Option("--no-verify", help="Skip the per-step bitwise check against eager calls.")
    ] = False,
) -> None:
    """A dispatcher against fixed arms along a grow decode trajectory, every contender replayed as a CUDA graph.

    Per step each contender is prepared once (choose + re-plan), replayed in ABBA iterations with an L2 flush
    before each call, timed by CUDA events; the receipt gives each total with its 95% interval, the
    dispatcher's gain over the best fixed arm and its regret against the per-step oracle, switches,
    graphs and memory, and the host time per step split into choose / re-plan / launch.

    Example: traceattr decode --q 8 -a fa3 -a flashmla --table examples/sweeps/h200_27shapes_graphs_dispatch.json --table-mode graphs -o out
    From a serving log: traceattr decode --q 8 --trajectory file --seq-lens batches.txt --table T.json -o out
    """
    from traceattr.core.errors import TraceattrError
    from traceattr.jobs.decode import DecodeConfig, config_for_file, parse_arms_text, run_decode, write_receipts

    if q is None and not mix_q:
        raise TraceattrError("give --q, or --mix-q with --trajectory mixq")
    if table_mode not in (None, "eager", "graphs"):
        raise TraceattrError(f"--table-mode must be eager or graphs, got {table_mode!r}")
    if (trajectory == "file") != (seq_lens is not None):
        raise TraceattrError("--trajectory file and --seq-lens FILE go together")
    common = dict(
        q=q if q is not None else max(mix_q or [1]), heads=heads, iters=iters,
        arms=parse_arms_text(arm or ["fa3", "flashmla"]), table=str(table) if table else None,
        table_mode=table_mode, allow_other_mode=allow_other_mode, grid=grid, verify=not no_verify,
        rules=tuple(rule or ["max"]), mix_q=tuple(mix_q or ()),
    )  # fmt: skip
    if seq_lens is not None:  # read and checked here, before any GPU work: a bad file costs nothing
        cfg = config_for_file(str(seq_lens), batch=batch, **common)
    else:
        cfg = DecodeConfig(batch=batch, start=start, stop=stop, steps=steps, trajectory=trajectory, **common)  # type: ignore[arg-type]
    result = run_decode(cfg, log=lambda m: typer.echo(f"[decode] {m}"))
    jpath, mpath = write_receipts(result, out, name)
    s = result.summary
    typer.echo(
        f"dispatcher {s.totals['dispatch'].value:,.1f} µs per pass, best fixed {s.best_fixed} "
        f"{s.totals[s.best_fixed].value:,.1f} µs: gain {s.gain.value:+.2%} [{s.gain.lo:+.2%}, {s.gain.hi:+.2%}], "
        f"regret vs oracle {s.regret.value:+.2%} [{s.regret.lo:+.2%}, {s.regret.hi:+.2%}], {s.switches} switch(es)"
    )
    typer.echo(f"wrote {jpath} and {mpath}")

"""``traceattr report``: one self-contained HTML report of a trace or a profile run."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from traceattr.attribution.engine import RangeFilter, attribute
from traceattr.attribution.roles import RoleRules
from traceattr.backends.arms import same_program
from traceattr.cli import app
from traceattr.cli.options import (
    Basis,
    DomainOpt,
    GroupOpt,
    MatchOpt,
    ModeChoice,
    ModeOpt,
    RulesOpt,
    TimeOpt,
    TraceArg,
    check_group,
    check_regex,
)
from traceattr.core import runfolder
from traceattr.core.errors import TraceattrError
from traceattr.core.output import check_file_target
from traceattr.core.records import RunRecord, SweepRecord, read_run, runner_events, sweep_file
from traceattr.present.formats import size
from traceattr.present.names import printable
from traceattr.trace.inputs import resolve_trace
from traceattr.trace.loader import load_trace

ReportFormat = Enum("ReportFormat", {f: f for f in ("html", "text")}, type=str)  # type: ignore[misc]


@app.command("report")
def report_command(
    trace: TraceArg,
    out: Annotated[
        Optional[Path],
        typer.Option(
            "--out", "-o", help="HTML file to write (default: RUN_DIR/report.html, or <trace>.report.html beside it)."
        ),
    ] = None,
    mode: ModeOpt = ModeChoice.nsys,  # type: ignore[attr-defined]
    domain: DomainOpt = None,
    match: MatchOpt = None,
    group: GroupOpt = None,
    rules: RulesOpt = None,
    title: Annotated[Optional[str], typer.Option(help="Page title (default: the trace's file name).")] = None,
    basis: TimeOpt = Basis.span,  # type: ignore[attr-defined]
    fmt: Annotated[
        ReportFormat,
        typer.Option(
            "--format",
            "-f",
            help="html (the page), or text: the decision on the terminal, nothing written (a round folder: its "
            "receipt, then the decision it states; a sweep: its steps and answer).",
        ),
    ] = ReportFormat.html,  # type: ignore[attr-defined]
) -> None:
    """Write one self-contained HTML report: numbers, role bars, distributions, timeline, time vs context.

    Example: traceattr report reports/2026-11-29_q8_ctx900k/   (writes report.html into the run folder)
    A round folder (traceattr round) gives its receipt, then its first capture's figures; a sweep folder
    (traceattr sweep) or its sweep.json gives its answer, the bisection on the decision chart and the
    regret of its dispatch table; a decode receipt (traceattr decode: its NAME.json, or a folder holding
    one) gives each contender's total, the dispatcher's gain and regret, and every step along ctx.
    """
    chosen = (domain, match, group, rules, mode != ModeChoice.nsys, basis != Basis.span)  # type: ignore[attr-defined]
    if fmt.value == "text":
        _text_report(trace, chosen, mode.value, RangeFilter(domain, match), group, rules, basis.value)
        return
    if trace.is_dir() and (trace / f"{runfolder.RECEIPT}.json").is_file():
        _round_report(trace, out, title, chosen=chosen)
        return
    receipt = _decode_receipt(trace)
    if receipt is not None:
        _decode_report(trace, receipt, out, title, chosen)
        return
    record_file = (sweep_file(trace) or trace) if trace.is_dir() else trace
    if record_file.suffix == ".json" and record_file.is_file():
        _sweep_report(trace, record_file, out, title, chosen)
        return
    path = resolve_trace(trace)
    role_rules = RoleRules.load(rules)
    check_regex(match)
    check_group(group)
    from traceattr.analysis.calls import calls_to_read_again, reduced_calls
    from traceattr.attribution.columns import TIMELINE_COLUMNS
    from traceattr.trace.loader import may_read_again, row_ids

    target = _target(trace, out)
    events = runner_events(trace)
    check_file_target(target, (trace, path), ours=_is_report)
    from traceattr.present.steps import attributing, steps  # on stderr, a terminal only: seconds per step

    # a run folder's in-kernel stamps: the page's "Inside the kernel" (docs/phases.md), read (and refused when
    # broken) before the work. A trace without them is not made to import the phases' modules (numpy) under its
    # attribution's peak.
    phases = None
    if runfolder.has_stamps(trace):
        from traceattr.present.phases import load

        phases = load(trace)

    with steps() as step:
        step(f"read {path}")
        select = RangeFilter(domain, match)
        # the calls the timeline draws, once chosen, are read again from an SQLite export by rowid where they can
        # be: the launch configuration (shown only there) is read with them
        again_maybe = not select.active and may_read_again(path)
        held = [load_trace(path, launch_config=not again_maybe)]  # handed over, not held here: see reduced_calls
        rows = row_ids(path, held[0]) if again_maybe else None
        if again_maybe and rows is None:  # rowids with gaps, rows merged at load: what the timeline draws is kept
            held.clear()  # the first read let go before the second
            held.append(load_trace(path))
        step(attributing(held[0]))
        # the attribution reduced to its calls as it is made
        again = None
        if rows is not None:
            att, calls, again = calls_to_read_again(held.pop(), rows, mode.value, role_rules, group)
        else:
            att, calls = reduced_calls(held.pop(), mode.value, role_rules, select, group, keep=TIMELINE_COLUMNS,
                                       ops=True)  # fmt: skip
        # the analysis (numpy) and the report (plotly, ~25 MB, once its analysis is made: present.report._build)
        # are imported once the attribution is done: none of it stands under its peak
        from traceattr.present.report import write_report

        info = write_report(
            att, target, title=title, run=_run_info(trace), group=group, events=events, same_program=same_program,
            basis=basis.value, calls=calls, again=again, phases=phases, step=step,
        )  # fmt: skip
    for note in info.notes:
        print(f"note: {printable(note)}", file=sys.stderr)
    print(f"wrote {info.path} ({size(info.size_bytes, 1)})")


def _text_report(trace: Path, chosen: tuple[Any, ...], mode: str, select: RangeFilter, group: str | None,
                 rules: Path | None, basis: str) -> None:  # fmt: skip
    """The decision on the terminal: a round folder's receipt and what it states, a sweep's steps and answer, or a
    trace's verdict."""
    from traceattr.present.console import console

    con = console()
    record_file = (sweep_file(trace) or trace) if trace.is_dir() else trace
    if record_file.suffix == ".json" and record_file.is_file():  # a sweep (its folder or sweep.json), as it ended
        from traceattr.present.sweep_view import render_steps

        decode = _decode_receipt(trace)
        if decode is not None:
            raise TraceattrError(f"{trace}: a decode receipt's text is {decode.with_suffix('.md').name} beside it; "
                                 "drop --format text for its page")  # fmt: skip
        if any(chosen):
            raise TraceattrError(f"{trace}: a sweep's report reads its sweep.json; drop "
                                 "--mode/--domain/--match/--group/--rules/--time")  # fmt: skip
        render_steps(SweepRecord.read(record_file), con)
        return
    folder = runfolder.round_folder_of(trace)
    if folder is not None and trace == folder:
        from traceattr.analysis.round_decision import receipt_decision
        from traceattr.jobs.round import read_receipt
        from traceattr.present.phases import load_round
        from traceattr.present.receipt_view import render_round

        if any(chosen):
            raise TraceattrError(f"{folder}: a round folder's receipt is as the round judged it; drop "
                                 "--mode/--domain/--match/--group/--rules/--time")  # fmt: skip
        receipt = read_receipt(folder)
        render_round(receipt, receipt_decision(receipt, str(folder)), con, load_round(receipt, folder))
        return
    from traceattr.analysis.pipeline import analyse
    from traceattr.present.comparison import render_verdicts

    att = attribute(load_trace(resolve_trace(trace)), mode=mode, rules=RoleRules.load(rules), select=select)  # type: ignore[arg-type]
    analysis = analyse(att, group=group, events=runner_events(trace), same_program=same_program, basis=basis)
    if analysis.note is not None or analysis.decision is None:
        raise TraceattrError(f"{trace}: {analysis.note or 'nothing to decide'}")
    render_verdicts(analysis.decision, con)
    from traceattr.present.phases import load, render_phases

    phases = load(trace)
    if phases is not None:
        render_phases(phases, con)


def _round_report(folder: Path, out: Path | None, title: str | None, chosen: tuple[Any, ...]) -> None:
    from traceattr.jobs.round import capture_folders, read_receipt, write_round_report
    from traceattr.present.phases import load_round

    if any(chosen):
        raise TraceattrError(f"{folder}: a round folder's report uses its captures as they ran; drop "
                             "--mode/--domain/--match/--group/--rules/--time (or report one capture's run folder)")  # fmt: skip
    receipt = read_receipt(folder)
    target = _target(folder, out)
    traces = [c / runfolder.TRACE for c in capture_folders(receipt, folder)]
    check_file_target(target, (folder / f"{runfolder.RECEIPT}.json", *traces), ours=_is_report)
    phases = load_round(receipt, folder)
    written = write_round_report(receipt, folder, target, title, phases=phases)
    if not any(t.is_file() for t in traces):
        shown = (
            "the receipt, its evidence and its phases (from the stamps)" if phases else "the receipt and its evidence"
        )
        print(f"note: {printable(str(folder))}: no capture has its {runfolder.TRACE}: {shown} only, no other "
              "figures", file=sys.stderr)  # fmt: skip
    print(f"wrote {written} ({size(written.stat().st_size, 1)})")


def _sweep_report(given: Path, record_file: Path, out: Path | None, title: str | None, chosen: tuple[Any, ...]) -> None:
    if any(chosen):
        raise TraceattrError(f"{given}: a sweep's report reads its sweep.json; drop "
                             "--mode/--domain/--match/--group/--rules/--time")  # fmt: skip
    record = SweepRecord.read(record_file)
    target = _target(given, out)
    check_file_target(target, (record_file,), ours=_is_report)
    from traceattr.present.report.sweep import write_sweep_report  # imports plotly: after the cheap checks

    name = given.name if given.is_dir() else given.stem
    written = write_sweep_report(record, target, title or f"traceattr sweep {name}")
    print(f"wrote {written} ({size(written.stat().st_size, 1)})")


def _decode_receipt(trace: Path) -> Path | None:
    """The ``traceattr.decode/1`` receipt *trace* names: the file itself, or the one such file in the folder."""
    if trace.is_file() and trace.suffix != ".json":
        return None  # an export or a report, told without importing the decode job (numpy: ~10 MB resident)
    from traceattr.jobs.decode import SCHEMA as DECODE

    def is_decode(path: Path) -> bool:
        try:
            with path.open("rb") as fh:
                head = fh.read(4096)
        except OSError:
            return False
        return f'"schema": "{DECODE}"'.encode() in head

    if trace.is_file():
        return trace if is_decode(trace) else None
    if not trace.is_dir() or sweep_file(trace) is not None:
        return None
    found = sorted(p for p in trace.glob("*.json") if is_decode(p))
    if len(found) > 1:
        raise TraceattrError(f"{trace}: holds {len(found)} decode receipts ({', '.join(p.name for p in found)}): "
                             "give one of them")  # fmt: skip
    return found[0] if found else None


def _decode_report(given: Path, receipt: Path, out: Path | None, title: str | None, chosen: tuple[Any, ...]) -> None:
    import json

    from traceattr.jobs.decode import result_from_json

    if any(chosen):
        raise TraceattrError(f"{given}: a decode receipt's report reads its JSON; drop "
                             "--mode/--domain/--match/--group/--rules/--time")  # fmt: skip
    target = _target(receipt, out) if given.is_file() or out is not None else given / runfolder.REPORT
    check_file_target(target, (receipt,), ours=_is_report)
    try:
        result = result_from_json(json.loads(receipt.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise TraceattrError(f"{receipt}: not JSON ({err})") from None
    except (KeyError, TypeError, ValueError, IndexError) as err:  # a field missing or of the wrong kind
        raise TraceattrError(f"{receipt}: not a readable decode receipt ({type(err).__name__}: {err})") from None
    from traceattr.jobs.decode_report import write_decode_report  # imports plotly: after the cheap checks

    with _decode_trace(receipt) as trace:
        written = write_decode_report(result, target, title or f"traceattr decode {receipt.stem}", trace)
    if trace is None:
        print(f"note: no {receipt.stem}.sqlite or {receipt.stem}.sqlite.xz beside {printable(str(receipt))}: "
              "the page has no timeline", file=sys.stderr)  # fmt: skip
    print(f"wrote {written} ({size(written.stat().st_size, 1)})")


XZ_LIMIT = 4 << 30  # bytes a compressed export may expand to: a larger one is refused, not filled into /tmp


@contextlib.contextmanager
def _decode_trace(receipt: Path) -> Iterator[Path | None]:
    """The run's nsys export beside *receipt* (NAME.sqlite, or NAME.sqlite.xz expanded into a temporary folder)."""
    plain, packed = receipt.with_suffix(".sqlite"), receipt.with_name(f"{receipt.stem}.sqlite.xz")
    if plain.is_file() or not packed.is_file():
        yield plain if plain.is_file() else None
        return
    import lzma
    import tempfile

    with tempfile.TemporaryDirectory(prefix="traceattr-decode-") as tmp:
        target = Path(tmp) / plain.name
        try:
            with lzma.open(packed) as src, target.open("wb") as dst:
                while chunk := src.read(1 << 20):
                    if dst.tell() + len(chunk) > XZ_LIMIT:
                        raise TraceattrError(f"{packed}: expands past {size(XZ_LIMIT)}: expand it yourself")
                    dst.write(chunk)
        except (lzma.LZMAError, EOFError, OSError) as err:
            raise TraceattrError(f"{packed}: not a readable .xz file ({err})") from None
        yield target


def _target(trace: Path, out: Path | None) -> Path:
    """Where the report goes: -o (a file, or an existing folder), the run folder, or beside the trace."""
    if out is not None:
        return out / runfolder.REPORT if out.is_dir() else out
    if trace.is_dir():
        return trace / runfolder.REPORT
    return trace.with_name(f"{trace.stem}.report.html")


def _is_report(head: bytes) -> bool:
    """The start of an HTML report traceattr wrote (the only file ``report`` may replace)."""
    return head.startswith(b"<!DOCTYPE html>") and b"traceattr" in head


def _run_info(trace: Path) -> RunRecord | None:
    """A run folder's run.json (GPU, driver, versions, commands), shown in the report's header."""
    return read_run(trace)

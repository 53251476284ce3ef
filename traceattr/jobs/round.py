"""``traceattr round``: an A/B optimization round over a set of rows, with receipts.

A round is ``captures`` separate captures (each one ``traceattr profile`` run
of every row with the two arms), the arm order alternating between captures
(baseline first in captures 1, 3, …; candidate first in 2, 4, …) and ABBA
inside each, the L2 flushed before every call. ``--sensitivity`` adds one
capture with each arm's calls back to back, to show how much the protocol
moves the answer. :mod:`traceattr.analysis.rounds` turns the captures into a
receipt; this module plans and runs them and writes the receipt files.

Captures go through an *executor* (default: :func:`profile_executor`, which
needs a GPU and nsys), so the orchestration is tested on CPU with a fake.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from traceattr import __version__
from traceattr.analysis.rounds import Capture, Receipt, Row, certain_refusals, round_rows
from traceattr.backends.arms import parse_arm, same_program
from traceattr.core import runfolder
from traceattr.core.errors import TraceattrError, TraceNote
from traceattr.core.output import write_manifest, write_table, write_text
from traceattr.core.progress import parse
from traceattr.core.protocol import CAPTURES, PROFILE, Gates, Protocol
from traceattr.core.records import MAX_CAPTURES, ReceiptRecord, read_object, read_run, read_runner
from traceattr.core.shapes import PUBLISHED_ROWS, ShapeError, parse_shape
from traceattr.phases.compare import RoundPhases
from traceattr.phases.layout import StampError
from traceattr.present.receipt import markdown, protocol_text, with_causes
from traceattr.runner.plan import check_between, check_timing

# Named row sets (--rows NAME); a file of shapes, one a line, works too.
ROW_SETS: dict[str, tuple[str, ...]] = {
    # decode on one H200: single-token and MTP verify widths, short to very long context
    "decode-h200": (
        "q1_ctx8k", "q1_ctx32k", "q1_ctx131k", "q1_ctx900k",
        "q4_ctx8k", "q4_ctx131k", "q8_ctx32k", "q8_ctx900k",
    ),
    "published": PUBLISHED_ROWS,  # row names kernel teams publish (traceattr shapes lists them)
    "smoke": ("q1_ctx8k", "q8_ctx32k"),  # two quick rows, to try a setup
}  # fmt: skip


def read_rows(spec: str) -> tuple[Row, ...]:
    """The rows of a named set or of a file (one shape a line; blank lines and ``#`` comments skipped)."""
    if spec in ROW_SETS:
        lines = [(f"row set {spec!r}", i + 1, text) for i, text in enumerate(ROW_SETS[spec])]
    else:
        path = Path(spec)
        if not path.is_file():
            raise TraceattrError(f"--rows {spec!r}: neither a file nor a named set ({', '.join(ROW_SETS)})")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise TraceattrError(f"{path}: unreadable ({err})") from None
        lines = [(str(path), i + 1, line.split("#", 1)[0].strip()) for i, line in enumerate(text.splitlines())]
    rows = checked_rows(lines)
    if not rows:
        raise TraceattrError(f"--rows {spec!r}: no rows")
    return rows


def checked_rows(lines: list[tuple[str, int | str, str]], shapes: list[str] | None = None) -> tuple[Row, ...]:
    """Rows from (where, line, label): each label a shape of the grammar, no shape twice; with *shapes* (a
    receipt's rows, retried), each label must also name the shape written beside it. ``--rows`` and
    ``--retry`` both read their rows through this, so a row one refuses the other refuses too."""
    rows: list[Row] = []
    seen: dict[str, str] = {}
    for i, (where, number, label) in enumerate(lines):
        if not label:
            continue
        try:
            shape = parse_shape(label).name
            if shapes is not None and parse_shape(shapes[i]).name != shape:
                raise ShapeError(f"row {label!r} is written with shape {shapes[i]!r:.60}, which it does not name")
        except ShapeError as err:
            raise TraceattrError(f"{where}:{number}: {err}") from None
        if shape in seen:
            raise TraceattrError(f"{where}:{number}: {label!r} is the same shape as {seen[shape]!r} ({shape})")
        seen[shape] = label
        rows.append(Row(label, shape))
    return tuple(rows)


def arm_label(text: str) -> str:
    """The label an arm's calls carry: ``s4=fa3[splits=4]`` → ``s4``; ``fa3[splits=4]`` → its canonical text."""
    return parse_arm(text).label


@dataclass(frozen=True)
class RoundPlan:
    rows: tuple[Row, ...]
    baseline: str
    candidate: str
    folder: Path
    captures: int = CAPTURES
    # a plan built in code times exactly protocol.iters iterations with the hold on; the command's defaults are
    # the "round" preset (traceattr.core.protocol.ROUND)
    protocol: Protocol = field(default_factory=lambda: PROFILE.held(True))
    gates: Gates = field(default_factory=Gates)
    rows_source: str = ""
    first_capture: int = 0  # a retry continues the numbering (and the alternation) of the round it retries

    def __post_init__(self) -> None:
        p = self.protocol
        # a round's hold is on or off (runner.hold: the host sets its length); plan.json says it as hold_us
        object.__setattr__(self, "protocol", p.held(p.hold))
        check_between(p.between)  # the user's text stays in the receipt; each capture's plan canonicalises it
        if self.labels[0] == self.labels[1]:
            raise TraceattrError(
                f"--baseline and --candidate are both {self.labels[0]!r}: an A/A round needs two labels for the "
                f"same program, so their calls can be told apart (e.g. --candidate again={self.baseline})"
            )
        if self.captures < 1 or p.iters < 2:
            raise TraceattrError("--captures must be at least 1 and --iters at least 2 (ABBA needs both orders)")
        if self.captures > MAX_CAPTURES:
            raise TraceattrError(
                f"--captures must be at most {MAX_CAPTURES} (each is a whole nsys run), got {self.captures}"
            )
        if p.warmup < 1:
            raise TraceattrError("--warmup must be at least 1 (warm-up compiles and validates)")
        if p.flush_bytes is not None and p.flush_bytes <= 0:
            raise TraceattrError(f"--flush-mb must be positive, got {p.flush_bytes / (1 << 20):g}")
        check_timing(p.iters, p.max_noise, p.max_iters, self.protocol.hold_us)

    @property
    def labels(self) -> tuple[str, str]:
        """(baseline, candidate) as their calls name them: the arms' labels."""
        return arm_label(self.baseline), arm_label(self.candidate)

    def requests(self) -> list[CaptureRequest]:
        shapes = tuple(r.shape for r in self.rows)
        out = []
        for i in range(self.captures):
            index = self.first_capture + i
            arms = (self.baseline, self.candidate) if index % 2 == 0 else (self.candidate, self.baseline)
            out.append(CaptureRequest(index, shapes, arms, "abba", self.folder / runfolder.capture_folder(index)))
        if self.protocol.sensitivity:
            out.append(
                CaptureRequest(
                    -1, shapes, (self.baseline, self.candidate), "blocked", self.folder / runfolder.SENSITIVITY
                )
            )
        return out

    def header(self) -> dict[str, Any]:
        return {
            "tool": "traceattr", "version": __version__, "command": "round", "argv": sys.argv,
            "baseline": self.labels[0], "candidate": self.labels[1], "rows_source": self.rows_source,
            "arms": {"baseline": self.baseline, "candidate": self.candidate},
            "protocol": receipt_protocol(self.protocol, self.captures),
            "gates": self.gates.to_json(),
        }  # fmt: skip


def receipt_protocol(p: Protocol, captures: int) -> dict[str, Any]:
    """The protocol as receipt.json's header holds it (its layout predates the record; Protocol.from_json
    reads it back)."""
    return {
        "captures": captures, "iters": p.iters, "warmup": p.warmup, "order": "abba", "max_noise": p.max_noise,
        "max_iters": p.max_iters, "hold": p.hold, "hold_us": p.hold_us, "lead": p.lead,
        "arm_order": "alternating between captures", "between": p.between, "cold_l2": p.between != "none",
        "flush_bytes": p.flush_bytes, "graphs": p.graphs, "seed": p.seed, "sensitivity": p.sensitivity,
        "timing": TIMING,
    }  # fmt: skip


TIMING = "nsys GPU span per call (first op start to last op end)"  # what a round's and a sweep's ratio compares


@dataclass(frozen=True)
class CaptureRequest:
    index: int  # 0-based capture index; -1: the back-to-back sensitivity capture
    shapes: tuple[str, ...]
    arms: tuple[str, ...]  # in the order of this capture (the first runs first in even iterations)
    order: str  # "abba" or "blocked"
    folder: Path


Executor = Callable[[CaptureRequest, RoundPlan, Callable[[str], None]], Capture]


def profile_executor(request: CaptureRequest, plan: RoundPlan, on_line: Callable[[str], None]) -> Capture:
    """One capture through ``traceattr profile`` (needs a CUDA GPU and nsys)."""
    from traceattr.jobs.profile import execute, make_plan

    protocol = replace(plan.protocol, order=request.order)
    profile_plan = make_plan([parse_shape(s) for s in request.shapes], request.arms, protocol,
                             out_root=request.folder.parent)  # fmt: skip
    # one report.html for the whole round (the receipt first), not one per capture
    result = execute(replace(profile_plan, folder=request.folder), on_line=on_line, report=False)
    return Capture(request.index, result.calls, result.runner, str(request.folder), request.order,
                   attribution=result.attribution, run=result.run, shapes=request.shapes)  # fmt: skip


@dataclass(frozen=True)
class RoundResult:
    """What a finished round answers: its receipt, and its phases when the captures hold stamps (computed once:
    receipt.md, phases.md, the page and the terminal all render these)."""

    receipt: Receipt
    phases: RoundPhases | None


def run_round(plan: RoundPlan, executor: Executor = profile_executor, **options: Any) -> Receipt:
    """:func:`round_result`'s receipt alone (its keyword *options*)."""
    return round_result(plan, executor, **options).receipt


def round_result(
    plan: RoundPlan,
    executor: Executor = profile_executor,
    *,
    on_line: Callable[[str], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
    previous: Receipt | None = None,
    report: bool = False,
) -> RoundResult:
    """Run every capture of *plan*, then build (or, with *previous*, extend) the receipt and write it; the
    receipt and the round's phases.

    receipt.json is written last (after report.html with *report*): a round folder with receipt.json is
    complete; one without is an interrupted round, whose captures are kept (each a run folder of its own).
    """
    plan.folder.mkdir(parents=True, exist_ok=False)
    captures: list[Capture] = []
    sensitivity: list[Capture] = []
    requests = plan.requests()
    last_abba = max((i for i, r in enumerate(requests) if r.order == "abba"), default=-1)
    live, stopped = list(plan.rows), {}  # rows still measured; why the others stopped early
    for i, request in enumerate(requests):
        if not live:  # every row's refusal is already certain: no capture left would change the receipt
            break
        request = replace(request, shapes=tuple(r.shape for r in live))
        label = "back to back" if request.order == "blocked" else f"capture {request.index + 1}"

        def show(line: str, label: str = label) -> None:
            if on_line is not None:
                on_line(line)
            event = parse(line)
            if event is not None and event.timing is not None and on_progress is not None:
                on_progress(f"{label}: {event.timing}")

        capture = replace(executor(request, plan, show), shapes=request.shapes)
        (sensitivity if request.order == "blocked" else captures).append(capture)
        if request.order == "abba" and i < last_abba:  # more captures to come: stop the rows already decided
            stopped.update(certain_refusals(live, captures, *plan.labels, plan.gates))
            live = [r for r in live if r.label not in stopped]
    rows = round_rows(plan.rows, captures, *plan.labels, plan.gates, sensitivity=sensitivity, stopped=stopped)
    folders = tuple(c.folder for c in [*captures, *sensitivity] if c.folder)
    if previous is None:
        header = plan.header()
        header["runner"] = _runner_facts(captures)
        if header["protocol"]["flush_bytes"] is None:  # profile chose it from the L2 size: record what ran
            header["protocol"]["flush_bytes"] = header["runner"].get("flush_bytes")
        receipt = Receipt(header, rows, folders)
    else:
        merged = previous.with_attempt(rows, folders)
        retries = [*previous.header.get("retry_captures", []), plan.captures]
        receipt = replace(merged, header={**previous.header, "retry_captures": retries})
    receipt = with_causes(receipt)
    phases = _round_phases(receipt, plan.folder)
    if report:
        # a round's figures are its first capture's, just made; a retry's receipt starts with the earlier round's
        first = captures[0] if previous is None and captures else None
        write_round_report(receipt, plan.folder, first=first, phases=phases)
    write_receipt(receipt, plan.folder, phases)
    return RoundResult(receipt, phases)


def _round_phases(receipt: Receipt, folder: Path) -> RoundPhases | None:
    """The round's phases when its captures hold stamps. Stamps that cannot be trusted cost the phases, not the
    receipt the captures paid for: a note says why (``traceattr report`` on the folder refuses them in one line)."""
    from traceattr.present.phases import load_round

    try:
        return load_round(receipt, folder)
    except StampError as err:
        warnings.warn(TraceNote(f"the round's phases are left out: {err}"), stacklevel=2)
        return None


def _runner_facts(captures: Sequence[Capture]) -> dict[str, Any]:
    """What the runner itself recorded about the protocol and the GPU (first capture)."""
    if not captures:
        return {}
    r = captures[0].runner
    return {"gpu": r.facts("gpu"), "protocol": r.facts("protocol"), "arms": r.facts("arms"),
            "flush_bytes": r.flush_bytes}  # fmt: skip


def write_receipt(receipt: Receipt, folder: Path, phases: RoundPhases | None = None) -> list[Path]:
    """receipt.md, receipt.csv and receipt.json in *folder* (each written whole or not at all; the JSON last);
    with *phases* (stamped captures), receipt.md says which phase moved and phases.md holds the phase receipt."""
    from traceattr.present.phases import round_markdown

    md = write_text(folder / f"{runfolder.RECEIPT}.md", markdown(receipt, phases))
    extra = [] if phases is None else [write_text(folder / f"{runfolder.PHASES}.md", round_markdown(phases, receipt))]
    csv = write_table(receipt.csv_frame(), folder, runfolder.RECEIPT, "csv")
    js = write_manifest(folder, f"{runfolder.RECEIPT}.json", receipt.to_json())
    return [md, *extra, csv, js]


def read_receipt(path: Path) -> Receipt:
    """A receipt.json written by :func:`write_receipt` (a round folder names its receipt.json), checked as input."""
    if path.is_dir():
        if not (path / f"{runfolder.RECEIPT}.json").is_file():
            raise TraceattrError(
                f"{path}: no {runfolder.RECEIPT}.json: not a round folder, or a round that did not finish "
                "(its captures are run folders of their own)"
            )
        path = path / f"{runfolder.RECEIPT}.json"
    return Receipt.from_record(ReceiptRecord.from_json(read_object(path, "receipt"), path))


def capture_folders(receipt: Receipt, folder: Path) -> list[Path]:
    """The receipt's capture run folders that exist, found beside *folder*'s receipt when the round moved."""
    found = []
    for name in receipt.captures:
        stored = Path(name)
        for candidate in (stored, folder / stored.name):
            if (candidate / runfolder.TRACE).is_file():
                found.append(candidate)
                break
    return found


def write_round_report(
    receipt: Receipt,
    folder: Path,
    target: Path | None = None,
    title: str | None = None,
    *,
    first: Capture | None = None,
    phases: RoundPhases | None = None,
) -> Path:
    """report.html of a round: the receipt, then the first capture's figures (without any capture's trace: the
    receipt and its evidence alone).

    *first*: that capture as just made (its attribution and run record in memory); without it, or when it
    kept no attribution, the receipt's first capture found on disk is read again (``traceattr report``).
    *phases*: the round's phases (:func:`traceattr.present.phases.load_round`), when its captures hold stamps.
    """
    from traceattr.present.report import write_report

    if first is not None and first.attribution is not None:
        att, run, events = first.attribution, first.run, list(first.runner.events)
    else:
        from traceattr.attribution.engine import attribute
        from traceattr.trace.loader import load_trace

        found = next(iter(capture_folders(receipt, folder)), None)
        if found is None:  # the traces are gone: the receipt and its evidence still make a page
            from traceattr.core.output import write_bytes
            from traceattr.present.report.round import receipt_only_page

            page = receipt_only_page(receipt, title or f"traceattr round {folder.name}", phases)
            return write_bytes(target or folder / runfolder.REPORT, page)
        att = attribute(load_trace(found / runfolder.TRACE))
        runner = read_runner(found)
        run, events = read_run(found), None if runner is None else list(runner.events)
    info = write_report(att, target or folder / runfolder.REPORT, title=title or f"traceattr round {folder.name}",
                        run=run, receipt=receipt, events=events, same_program=same_program,
                        round_phases=phases)  # fmt: skip
    return info.path


def retry_plan(
    previous: Receipt, out_root: Path, *, captures: int | None = None, source: str = f"{runfolder.RECEIPT}.json"
) -> RoundPlan:
    """A plan that re-measures only the refused rows of *previous*, with its arms, protocol and gates."""
    refused = previous.retry_rows()
    if not refused:
        raise TraceattrError("nothing to retry: every row of the receipt passed")
    # checked as --rows checks its rows: an edited receipt's row is refused here, not listed by --dry-run
    rows = checked_rows([(source, f"row {r.label!r:.60}", r.label) for r in refused], [r.shape for r in refused])
    record = ReceiptRecord(previous.header, ())
    baseline, candidate = record.arms
    # the receipt's protocol as it ran (a receipt written before leads ran none: Protocol.from_json says so)
    return RoundPlan(
        rows=rows, baseline=baseline, candidate=candidate, folder=folder_name(out_root, baseline, candidate, "retry"),
        captures=captures or record.round_captures, protocol=record.protocol, gates=record.gates,
        rows_source=record.rows_source, first_capture=record.captures_done,
    )  # fmt: skip


def plan_round(
    rows: str, baseline: str, candidate: str, out_root: Path, *, captures: int | None = None, protocol: Protocol,
    gates: Gates,
) -> RoundPlan:  # fmt: skip
    """The plan of a new round (``traceattr round``) over *rows* (a named set or a file); every range is checked
    here, before any capture."""
    return RoundPlan(rows=read_rows(rows), baseline=baseline, candidate=candidate,
                     folder=folder_name(out_root, baseline, candidate), captures=CAPTURES if captures is None else captures,
                     protocol=protocol, gates=gates, rows_source=rows)  # fmt: skip


@dataclass(frozen=True)
class RoundJob:
    """A round ready to run: its plan, its captures, and the receipt it continues (a retry), checked before any
    folder exists. What ``traceattr round`` asks of the library (:func:`round_job`)."""

    plan: RoundPlan
    previous: Receipt | None = None

    @functools.cached_property
    def requests(self) -> list[CaptureRequest]:
        """The plan's captures, made once (the headline, the dry run and the progress bar all count them)."""
        return self.plan.requests()

    def headline(self) -> str:
        p = self.plan
        return f"{p.candidate} vs {p.baseline}: {len(p.rows)} rows × {len(self.requests)} captures → {p.folder}"

    def dry_run_lines(self) -> list[str]:
        """What ``--dry-run`` prints: the protocol, each capture with its first arm, each row."""
        lines = [protocol_text(self.plan.header())]
        for r in self.requests:
            what = "back to back" if r.order == "blocked" else "ABBA"
            lines.append(f"{r.folder.name}: {what}, first arm {r.arms[0]}")
        return [*lines, *(f"row {row.label} = {row.shape}" for row in self.plan.rows)]

    @property
    def steps(self) -> int:
        """Progress steps of :meth:`run`: one per row and capture."""
        return len(self.plan.rows) * len(self.requests)

    def run(self, on_line: Callable[[str], None] = lambda _: None,
            on_progress: Callable[[str], None] = lambda _: None) -> RoundResult:  # fmt: skip
        """Capture, judge, write the receipts and the page; an empty round folder is removed when it stops."""
        try:
            return round_result(self.plan, on_line=on_line, on_progress=on_progress, previous=self.previous,
                                report=True)  # fmt: skip
        except BaseException:
            with contextlib.suppress(OSError):  # an empty round folder says nothing; one with a capture is kept
                self.plan.folder.rmdir()
            raise


def round_job(
    rows: str | None, baseline: str | None, candidate: str | None, out_root: Path, *, captures: int | None = None,
    protocol: Protocol, gates: Callable[[], Gates], retry: Path | None = None, runnable: bool = True,
) -> RoundJob:  # fmt: skip
    """The round ``traceattr round`` asks for: a retry of *retry*'s refused rows (its arms, protocol and gates),
    else a new round over *rows*; with *runnable*, refused here (one line) when its first capture could not run.
    *gates* is asked for only by a new round with its rows and arms given (so those refusals come first)."""
    if retry is not None:
        previous = read_receipt(retry)
        source = retry / f"{runfolder.RECEIPT}.json" if retry.is_dir() else retry
        job = RoundJob(retry_plan(previous, out_root, captures=captures, source=str(source)), previous)
    else:
        missing = [
            name for name, v in (("--rows", rows), ("--baseline", baseline), ("--candidate", candidate)) if not v
        ]
        if missing or not (rows and baseline and candidate):
            raise TraceattrError(f"missing {', '.join(missing)} (or --retry RECEIPT)")
        job = RoundJob(
            plan_round(rows, baseline, candidate, out_root, captures=captures, protocol=protocol, gates=gates())
        )
    if runnable:
        require_runnable(job.plan)  # before the round folder exists: a refused round leaves nothing behind
    return job


def require_runnable(plan: RoundPlan) -> None:
    """One line, exit 2, when the first capture could not run here (no GPU, no nsys, no backend for the arms)."""
    from traceattr.jobs import profile

    first = plan.requests()[0]
    profile.require_runnable(profile.make_plan([parse_shape(s) for s in first.shapes], first.arms, plan.protocol,
                                               out_root=first.folder.parent))  # fmt: skip


def folder_name(out_root: Path, baseline: str, candidate: str, kind: str = "round") -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.=-]+", "-", f"{candidate}_vs_{baseline}").strip("-")
    return out_root / f"{time.strftime('%Y%m%d-%H%M%S')}_{kind}_{safe}"

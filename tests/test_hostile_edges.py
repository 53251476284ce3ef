"""The third hostile corpus (issue 33): output races, the terminal's edges, edited records, tiny
limits, injection. One test per class; each failed on the main of its day."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from traceattr.core.output import OutputError, ResultSet, check_file_target, write_text

EXAMPLES = Path(__file__).parent.parent / "examples"
SWEEP = EXAMPLES / "traces" / "h200_mla_sweep.sqlite"
SWEEP_FILE = EXAMPLES / "sweeps" / "h200_q8_fa3_flashmla_eager.json"


def run(*args: object, timeout: float = 60, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "traceattr", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, check=False, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


# -- ownership is checked at the swap, not only before the work ---------------------------------------


def test_a_folder_or_file_made_during_the_work_is_never_replaced(tmp_path: Path) -> None:
    frame = pl.DataFrame({"a": [1]})
    # a folder made (with the user's file in it) while the set is staged
    made = tmp_path / "made"
    with (
        pytest.raises(OutputError, match=r"appeared while .* the new result is in .*made\.new"),
        ResultSet(made, command="diff", manifest="manifest.json") as result,
    ):
        result.table(frame, "diff", "csv")
        made.mkdir()
        (made / "precious.txt").write_text("mine")
    assert os.listdir(made) == ["precious.txt"] and (made / "precious.txt").read_text() == "mine"
    assert sorted(os.listdir(tmp_path / "made.new")) == ["diff.csv"]
    # a previous set the user added a file to meanwhile
    kept = tmp_path / "kept"
    with ResultSet(kept, command="diff", manifest="manifest.json") as result:
        result.table(frame, "diff", "csv")
        result.write_manifest({})
    with (
        pytest.raises(OutputError, match="changed while"),
        ResultSet(kept, command="diff", manifest="manifest.json") as result,
    ):
        result.table(frame, "diff", "csv")
        (kept / "precious.txt").write_text("mine")
    assert (kept / "precious.txt").read_text() == "mine" and (tmp_path / "kept.new" / "diff.csv").is_file()

    # -o FILE: a file written after the check, and one changed after it
    def ours(head: bytes) -> bool:  # as report -o knows its own pages
        return b"traceattr" in head

    for before in (None, "<html>traceattr</html>"):
        target = tmp_path / f"notes-{before is None}.html"
        if before is not None:
            target.write_text(before)
        check_file_target(target, [], ours=ours)
        target.write_text("the user's notes")
        with pytest.raises(OutputError, match=r"while the result was being written.*notes-\w+\.new\.html"):
            write_text(target, "<html>report</html>")
        assert target.read_text() == "the user's notes"
        assert target.with_name(f"{target.stem}.new.html").read_text() == "<html>report</html>"
    # unchanged since the check: replaced as before; changed into another result of ours (a concurrent run's) too
    target = tmp_path / "report.html"
    check_file_target(target, [], ours=ours)
    write_text(target, "<html>traceattr again</html>")
    assert target.read_text() == "<html>traceattr again</html>"
    check_file_target(target, [], ours=ours)
    target.write_text("<html>traceattr, a concurrent run</html>")
    write_text(target, "<html>traceattr last</html>")
    assert target.read_text() == "<html>traceattr last</html>"


@pytest.mark.slow
def test_special_outputs_and_inputs_are_refused_before_the_work(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    cases = [
        ("report", SWEEP, "-o", fifo),
        ("compare", SWEEP, "--json", fifo),
        ("dispatch", SWEEP_FILE, "-o", fifo),
        ("attribute", SWEEP, "--rules", fifo),
        ("dispatch", SWEEP_FILE, "--ctx-dist", fifo),
        ("report", SWEEP, "-o", "/dev/null"),
    ]
    for args in cases:  # in a child process: a hang fails here instead of blocking the suite
        out = run(*args, timeout=60)
        assert out.returncode == 2, (args, out.stderr)
        assert "regular file" in out.stderr and len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)


# -- the terminal's edges: closed and broken streams, encodings, file names ------------------------------


def shell(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """*script* under bash, ``T`` standing for the traceattr program."""
    return subprocess.run(
        ["bash", "-c", script.replace("T ", f"{sys.executable} -m traceattr ")],
        capture_output=True, text=True, errors="backslashreplace", timeout=120, check=False,
        env={**os.environ, **env},
    )  # fmt: skip


@pytest.mark.slow
def test_closed_and_broken_streams_end_without_a_traceback(tmp_path: Path) -> None:
    # a reader that leaves after one line: the SIGPIPE status, nothing on stderr
    for args in ("compare", "attribute", "shapes"):
        out = shell(f"T {args} {SWEEP if args != 'shapes' else ''} | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}")
        assert out.stdout.strip() == "141" and out.stderr == "", (args, out)
    # stdout closed: the answer went nowhere, said in one line
    out = shell(f"T compare {SWEEP} >&-; echo $? >&2")
    assert out.stderr.splitlines() == ["traceattr: standard output is closed; the answer was not written", "141"]
    out = shell(f"T attribute {SWEEP} --format csv >&-; echo $? >&2")
    assert out.stderr.splitlines()[-1] == "141" and "Traceback" not in out.stderr
    # stderr closed: the answer is written whole, exit 0
    whole = shell(f"T compare {SWEEP}").stdout
    out = shell(f"T compare {SWEEP} 2>&- >{tmp_path / 'out'}; echo $?")
    assert out.stdout.strip() == "0" and (tmp_path / "out").read_text() == whole


@pytest.mark.slow
@pytest.mark.parametrize(
    "env",
    [{"PYTHONIOENCODING": "latin-1"}, {"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "PYTHONUTF8": "0"}],
    ids=["latin-1", "ascii", "C-locale"],
)
def test_terminals_that_are_not_utf8_get_ascii_spellings(env: dict[str, str]) -> None:
    for args in (f"compare {SWEEP}", f"attribute {SWEEP}", "shapes", "--help", "compare --help"):
        out = shell(f"T {args}", **env)
        assert out.returncode == 0 and "Traceback" not in out.stderr, (args, out.stderr[-300:])
        assert out.stdout.strip()
    verdict = shell(f"T compare {SWEEP}", PYTHONIOENCODING="ascii").stdout
    assert "~238k ctx" in verdict and re.search(r"wins by 1\.\d\dx \[1\.\d\d-1\.\d\d\]", verdict), verdict[:400]


@pytest.mark.slow
def test_file_names_that_are_not_utf8_round_trip(tmp_path: Path) -> None:
    trace, other = tmp_path / os.fsdecode(b"run\xff.sqlite"), tmp_path / "b.sqlite"
    shutil.copyfile(SWEEP, trace)
    shutil.copyfile(SWEEP, other)
    search = tmp_path / os.fsdecode(b"s\xff.json")
    shutil.copyfile(SWEEP_FILE, search)
    name = os.fsdecode(b"o\xfe")
    cases = [
        (("report", trace, "-o", tmp_path / f"{name}.html"), None),
        (("compare", trace, "--json", tmp_path / f"{name}.json"), None),
        (("dispatch", search, "-o", tmp_path / f"{name}-d.json"), None),
        (("attribute", trace, other, "--out", tmp_path / name), tmp_path / name / "attribution.json"),
        (("compare", trace, other, "--out", tmp_path / f"{name}-c"), tmp_path / f"{name}-c" / "compare.json"),
    ]
    for args, manifest in cases:
        out = run(*args, cwd=tmp_path, timeout=120)
        assert out.returncode == 0 and "Traceback" not in out.stderr, (args, out.stderr[-400:])
        assert "\\xff" in out.stderr + out.stdout or "\\xfe" in out.stderr + out.stdout
        if manifest is not None:  # the manifest names the very file: its bytes come back
            inputs = json.loads(manifest.read_text(encoding="utf-8"))["inputs"]
            assert os.fsencode(inputs[0]).endswith(b"run\xff.sqlite"), inputs


def test_format_characters_are_escaped_like_control_characters() -> None:
    from traceattr.present.names import printable, shorten

    assert printable("fa3\u202eevil\u2066x\u200b\ufeff\u2028") == "fa3\\u202eevil\\u2066x\\u200b\\ufeff\\u2028"
    assert printable("µs ≈ 1.07× → ok é") == "µs ≈ 1.07× → ok é"  # printable text stays as it is
    assert printable(os.fsdecode(b"run\xff")) == "run\\xff"
    assert "\u202e" not in shorten("a\u202eb" * 40, 20)


# -- every record read as untrusted input ---------------------------------------------------------------

HOSTILE_NUMBERS = (0, -41, math.nan, math.inf, -math.inf, 10**400, 10**30, "x", [1], True)


def numeric_paths(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Where *doc* holds a number (not a bool): the paths a hostile edit changes."""
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in numeric_paths(v, (*at, k))]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in numeric_paths(v, (*at, i))]
    return [at] if isinstance(doc, int | float) and not isinstance(doc, bool) else []


def edited(doc: Any, path: tuple[Any, ...], value: object) -> str:
    doc = copy.deepcopy(doc)
    place = doc
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return json.dumps(doc)  # NaN and ±Infinity as Python writes them; 10**400 as its 401 digits


@pytest.fixture(scope="module")
def round_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.helpers import BASE, CAND, FakeExecutor, timing
    from traceattr.analysis.rounds import Row
    from traceattr.core.shapes import parse_shape
    from traceattr.jobs.round import RoundPlan, run_round

    tmp = tmp_path_factory.mktemp("round")
    rows = tuple(Row(s, parse_shape(s).name) for s in ("q1_ctx8k", "q1_ctx512k"))
    plan = RoundPlan(rows=rows, baseline=BASE, candidate=CAND, folder=tmp / "round")
    fast, odd = timing(0.8, noise=0.001), timing(1.1, first_bias=0.05, noise=0.001, seed=1)  # odd: refused
    pick = {rows[0].shape: fast, rows[1].shape: odd}
    executor = FakeExecutor(
        tmp, lambda shape, arm, i, pos: pick[shape](shape, arm, i, pos), name="trace.sqlite", rows=rows
    )
    receipt = run_round(plan, executor)
    assert receipt.final["status"].to_list() == ["pass", "refused"]
    return plan.folder


def answered_or_refused(rc: int, err: str, file: str) -> None:
    """Exit 0, or 2 with one line naming the file; never a traceback (exit 1)."""
    assert rc in (0, 2) and "Traceback" not in err, err[-600:]
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and file in lines[0], err


@pytest.mark.slow
def test_edited_records_are_refused_naming_file_field_and_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], round_folder: Path
) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.helpers import cli

    receipt = json.loads((round_folder / "receipt.json").read_text(encoding="utf-8"))
    search = json.loads(SWEEP_FILE.read_text(encoding="utf-8"))
    targets = [("receipt", p) for p in numeric_paths(receipt)] + [("search", p) for p in numeric_paths(search)]

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.sampled_from(targets), st.sampled_from(HOSTILE_NUMBERS))
    def check(target: tuple[str, tuple[Any, ...]], value: object) -> None:
        kind, path = target
        folder = tmp_path / "case"
        shutil.rmtree(folder, ignore_errors=True)
        if kind == "receipt":
            shutil.copytree(round_folder, folder)
            (folder / "receipt.json").write_text(edited(receipt, path, value), encoding="utf-8")
            runs = [("dispatch", folder), ("round", "--retry", folder, "--dry-run")]
            name = "receipt.json"
        else:
            folder.mkdir()
            (folder / "search.json").write_text(edited(search, path, value), encoding="utf-8")
            runs = [("dispatch", folder / "search.json")]
            name = "search.json"
        for args in runs:
            rc, _out, err = cli(capsys, *args)
            answered_or_refused(rc, err, name)
            if rc == 2 and value in (math.inf, 10**400, "x"):
                assert ".".join(map(str, path[-1:])) in err, (path, err)  # the field is named

    check()


def test_runner_events_of_the_wrong_type_are_refused_by_the_reader() -> None:
    from traceattr.core.errors import TraceError
    from traceattr.core.records import RunnerRecord

    event = {"backend": "fa3", "shape": "q1_ctx8k_h16_b1_bf16_p64", "iter": 0, "event_us": 12.5}
    for key in ("iter", "event_us"):
        for value in HOSTILE_NUMBERS:
            content = json.loads(json.dumps({"timed": True, "events": [{**event, key: value}]}))
            try:
                record = RunnerRecord.from_json(content, "runner.json")
            except TraceError as err:
                assert str(err).startswith("runner.json: ") and f"events[0].{key}" in str(err), err
                continue
            # what the reader lets through is what the events table holds: typed, finite, measured
            frame = pl.DataFrame(list(record.events)).select(pl.col("iter").cast(pl.Int64), pl.col("event_us"))
            assert frame["event_us"].dtype == pl.Float64 and frame["event_us"].min() > 0, (key, value)  # type: ignore[operator]


@pytest.mark.slow
def test_backend_for_reads_edited_tables_as_untrusted_input() -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from traceattr.present.dispatch import DispatchDocumentError, backend_for

    doc = json.loads((EXAMPLES / "sweeps" / "h200_27shapes_graphs_dispatch.json").read_text(encoding="utf-8"))
    places: list[tuple[Any, ...]] = []

    def walk(node: Any, at: tuple[Any, ...]) -> None:
        places.append(at)
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            walk(child, (*at, key))

    walk(doc, ())
    shapes = [f"{f['family'].replace('*', '')}{ctx}" for f in doc["families"] for ctx in ("1k", "64k", "2m")]
    hostile = st.sampled_from([*HOSTILE_NUMBERS, None, 42, "", {}, [], {"backend": 1}, "fa3"])

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.sampled_from(places[1:]), hostile, st.booleans(), st.sampled_from(shapes))
    def check(path: tuple[Any, ...], value: object, delete: bool, shape: str) -> None:
        edited_doc = copy.deepcopy(doc)
        place = edited_doc
        for key in path[:-1]:
            place = place[key]
        if delete and isinstance(place, dict):
            del place[path[-1]]
        else:
            place[path[-1]] = value
        try:
            picked = backend_for(edited_doc, shape)
        except DispatchDocumentError as err:
            assert str(err).strip() and "\n" not in str(err)
            return
        assert picked is None or isinstance(picked, str), (path, value, picked)

    check()
    for broken in (
        [],
        "x",
        None,
        {"schema": "traceattr.dispatch/2"},
        {"schema": "traceattr.dispatch/2", "families": 3},
    ):
        with pytest.raises(DispatchDocumentError):
            backend_for(broken, shapes[0])  # type: ignore[arg-type]


# -- injection: CSV formulas ------------------------------------------------------------------------------


@pytest.mark.slow
def test_csv_cells_never_start_a_formula(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers import cli, mutate

    kernel = "CUPTI_ACTIVITY_KIND_KERNEL"
    trace = mutate(tmp_path, f"""
        UPDATE StringIds SET value = '=HYPERLINK("http://x",' || value || ')'
            WHERE id IN (SELECT shortName FROM {kernel});
        UPDATE StringIds SET value = '@SUM(1)' || value WHERE id IN (SELECT demangledName FROM {kernel});
    """)  # fmt: skip
    texts: list[str] = []
    for command in ("attribute", "compare"):
        rc, out, err = cli(capsys, command, trace, "--out", tmp_path / command)
        assert rc == 0, err
        texts += [p.read_text(encoding="utf-8") for p in (tmp_path / command).glob("*.csv")]
    rc, out, err = cli(capsys, "attribute", trace, "--format", "csv")
    texts.append(out)
    quoted = 0
    for text in texts:
        frame = pl.read_csv(text.encode(), infer_schema=False)
        for column in frame.columns:
            cells = frame[column].drop_nulls()
            cells = cells.filter(cells.cast(pl.Float64, strict=False).is_null())  # a number -1.5 is no formula
            assert not cells.str.contains(r"^[=+\-@\t\r]").any(), (column, cells.to_list()[:3])
            quoted += int(cells.str.starts_with("'=HYPERLINK").sum() + cells.str.starts_with("'@SUM").sum())
    assert quoted > 0  # the names reached the files, made safe
    os.environ["TRACEATTR_CSV_RAW"] = "1"
    try:  # the opt-out writes them as they are
        rc, out, err = cli(capsys, "attribute", trace, "--out", tmp_path / "raw")
    finally:
        del os.environ["TRACEATTR_CSV_RAW"]
    kernels = pl.read_csv(tmp_path / "raw" / "kernels.csv", infer_schema=False)
    assert rc == 0 and kernels["name"].str.starts_with("@SUM(1)").all()


# -- resource limits ----------------------------------------------------------------------------------------


def limited(which: int, value: int) -> Any:
    import resource

    return lambda: resource.setrlimit(which, (value, value))


@pytest.mark.slow
def test_small_resource_limits_are_named_in_one_line() -> None:
    import resource

    for which, value, needle in (
        (resource.RLIMIT_NOFILE, 9, "open-file limit is 9 (ulimit -n)"),
        (resource.RLIMIT_AS, 1_000_000 * 1024, "address-space limit is 976 MiB (ulimit -v 1000000)"),
        (resource.RLIMIT_AS, 700_000 * 1024, "(ulimit -v 700000)"),
    ):
        for args in (("compare", SWEEP), ("attribute", SWEEP, SWEEP), ("--help",)):
            out = run(*args, preexec_fn=limited(which, value), timeout=60)
            lines = out.stderr.strip().splitlines()
            assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("traceattr: error: "), out.stderr
            assert needle in out.stderr, (args, out.stderr[-300:])


def test_limits_met_at_the_boundary_and_workers_capped() -> None:
    import errno
    import warnings

    from traceattr.cli.process import limit_reached
    from traceattr.core.cpus import usable_cpus
    from traceattr.core.errors import TraceNote
    from traceattr.jobs.many import capped_workers

    assert "too many open files (the limit is" in (limit_reached(OSError(errno.EMFILE, "Too many open files")) or "")
    assert "out of memory" in (limit_reached(MemoryError()) or "")
    assert limit_reached(ValueError("x")) is None
    cores = usable_cpus()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert capped_workers(100_000, 40, local=True) == min(40, cores)
        assert capped_workers(100_000, 3, local=False) == 3  # a remote cluster's cores are not ours to count
        assert capped_workers(None, 40, local=True) == min(40, cores)  # the default is no request: no note
    notes = [str(w.message) for w in caught if issubclass(w.category, TraceNote)]
    assert (
        notes[0]
        == f"-j 100000: {min(40, cores)} worker{'s' if min(40, cores) > 1 else ''} (40 traces, {cores} usable core{'s' if cores > 1 else ''})"
    )
    assert len(notes) == 2


# -- many traces don't lose columns ---------------------------------------------------------------------


@pytest.mark.slow
def test_pooled_traces_keep_roofline_bound_and_event_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers import cli

    rc, _out, err = cli(capsys, "compare", SWEEP, "--out", tmp_path / "one")
    assert rc == 0, err
    calls = pl.read_csv(tmp_path / "one" / "calls.csv").filter(pl.col("iter").is_not_null())
    events = calls.select("backend", "shape", "iter", (pl.col("gpu_span_ns") / 1000 + 1.0).alias("event_us"))
    for run_folder in ("r1", "r2"):  # two run folders of the same capture, each with its runner's events
        (tmp_path / run_folder).mkdir()
        shutil.copyfile(SWEEP, tmp_path / run_folder / "trace.sqlite")
        (tmp_path / run_folder / "runner.json").write_text(json.dumps({"timed": True, "events": events.to_dicts()}))
    key = ["shape", "backend"]
    for inputs, name in (
        ((SWEEP, tmp_path / "r1" / "trace.sqlite"), "two"),
        ((tmp_path / "r1", tmp_path / "r2"), "runs"),
    ):
        rc, _out, err = cli(capsys, "compare", *inputs, "--out", tmp_path / name)
        assert rc == 0, err
    one = pl.read_csv(tmp_path / "one" / "summary.csv").sort(key)
    two = pl.read_csv(tmp_path / "two" / "summary.csv").sort(key)
    assert one["roofline"].null_count() == 0 and two["roofline"].null_count() == 0
    assert two["bound"].to_list() == one["bound"].to_list()
    runs = pl.read_csv(tmp_path / "runs" / "summary.csv").sort(key)
    event_columns = [c for c in runs.columns if c.startswith("event_")]
    assert len(event_columns) == 6 and runs.select(event_columns).null_count().sum_horizontal()[0] == 0
    assert runs["event_us"].to_list() == pytest.approx((one["median_us"] + 1.0).to_list(), rel=0.05)


# -- the rest, by class --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_journals_views_spans_and_retried_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], round_folder: Path
) -> None:
    from tests.helpers import cli, mutate, one_line

    trace = mutate(tmp_path, "SELECT 1")
    journal = trace.with_name(trace.name + "-journal")
    journal.write_bytes(bytes(512))  # journal_mode=PERSIST after a commit: the header zeroed, not hot
    rc, _out, err = cli(capsys, "attribute", trace)
    assert rc == 0, err
    journal.write_bytes(bytes.fromhex("d9d505f920a163d7") + bytes(504))  # a header: hot, SQLite would roll back
    one_line(*cli(capsys, "attribute", trace)[::2], "rollback journal")
    journal.unlink()
    # NVTX_EVENTS as a view: refused naming the view (its rowids number the ranges)
    view = mutate(
        tmp_path, "ALTER TABLE NVTX_EVENTS RENAME TO n2; CREATE VIEW NVTX_EVENTS AS SELECT * FROM n2", "v.sqlite"
    )
    one_line(*cli(capsys, "attribute", view)[::2], "NVTX_EVENTS is a view")
    # every time shifted above 2^62: the message gives the real span, not "0 years"
    shift = 1 << 62
    kernel = "CUPTI_ACTIVITY_KIND_KERNEL"
    shifted = mutate(
        tmp_path,
        f'UPDATE {kernel} SET start = start + {shift}, "end" = "end" + {shift};'
        f'UPDATE NVTX_EVENTS SET start = start + {shift}, "end" = "end" + {shift};'
        f'UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = start + {shift}, "end" = "end" + {shift}',
        "s.sqlite",
    )
    line = one_line(*cli(capsys, "attribute", shifted)[::2], "beyond ±2^62 ns")
    assert "0 years" not in line and (" ms)" in line or " s)" in line), line
    # --retry reads a refused row's shape as --rows does
    edited = tmp_path / "round"
    shutil.copytree(round_folder, edited)
    receipt = json.loads((edited / "receipt.json").read_text(encoding="utf-8"))
    for row in receipt["rows"]:
        if row["status"] == "refused":
            row["row"] = row["shape"] = "garbage"
    (edited / "receipt.json").write_text(json.dumps(receipt), encoding="utf-8")
    rows_file = tmp_path / "rows.txt"
    rows_file.write_text("garbage\n")
    by_rows = one_line(*cli(capsys, "round", "--rows", rows_file, "--baseline", "fa3", "--candidate", "flashmla",
                            "--dry-run")[::2])  # fmt: skip
    by_retry = one_line(*cli(capsys, "round", "--retry", edited, "--dry-run")[::2], "receipt.json", "garbage")
    assert by_rows.split(": ", 3)[-1] == by_retry.split(": ", 3)[-1], (by_rows, by_retry)

"""Call-name grouping: traceattr's own grammar (writer = reader), the presets, --group regexes, and the
one-line notes that replace winners when a grouping cannot support a comparison.

Each trace is built at test time with tests.synth (schema-exact nsys DDL), named the way other tools
name their ranges: ctx digits at the end with no iteration, ``|`` and ``.`` separators, a backend with an
underscore in its name.
"""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl
import pytest

import traceattr
from tests.synth.builder import TraceBuilder
from traceattr.analysis.calls import grouping_note
from traceattr.analysis.pipeline import analyse
from traceattr.cli import main
from traceattr.present.report import build_report

KERNEL = "void attn_kernel<64>(Params)"
CTXS = (32768, 65536, 131072, 262144)
# per-call GPU µs: grows with ctx, so pooling shapes would show as a median no single shape has
US = {("fa2", c): 40 + c // 512 for c in CTXS} | {("fa3_pertoken", c): 30 + c // 1024 for c in CTXS}


def export(path: Path, name: object, *, calls_per: int = 3, domain: str | None = None,
           backends: tuple[str, ...] = ("fa2", "fa3_pertoken")) -> Path:  # fmt: skip
    """Top-level ranges named by name(backend, ctx, i), one kernel each, US[backend, ctx] µs long."""
    b = TraceBuilder()
    dom = b.domain(domain, tid=1) if domain else 0
    t = 1_000_000
    for ctx in CTXS:
        for i in range(calls_per):
            for backend in backends:
                b.push_range(tid=1, start=t, end=t + 5_000, message=name(backend, ctx, i), domain=dom)  # type: ignore[operator]
                gpu = t + 10_000
                b.launch(tid=1, start=t + 1_000, end=t + 1_500, kernel=KERNEL, gpu_start=gpu,
                         gpu_end=gpu + 1_000 * US[backend, ctx] + 10 * i)  # fmt: skip
                t = gpu + 1_000 * US[backend, ctx] + 50_000
    return b.write(path)


def medians(table: pl.DataFrame) -> dict[tuple[str, str], float]:
    per = table.group_by("backend", "shape").agg(pl.col("gpu_span_ns").median() / 1000)
    return {(r["backend"], r["shape"]): r["gpu_span_ns"] for r in per.iter_rows(named=True)}


# -- traceattr's own names: one definition for the runner (writer) and analysis (reader) -------------


# -- names other tools write --------------------------------------------------------------------------
STYLES = {
    # ctx digits end the name, no iteration: the digits stay in the shape (issue 7: pooled 4 contexts)
    "ctx-terminal, domain": (lambda b, c, i: f"{b}/q8_ctx{c}", "run"),
    "pipe": (lambda b, c, i: f"{b}|q8_ctx{c}|{i}", None),
    "dot": (lambda b, c, i: f"{b}.q8_ctx{c}.{i}", None),
    "underscore": (lambda b, c, i: f"{b}_q8_ctx{c}_{i}", None),
    "colon iteration, domain": (lambda b, c, i: f"{b}_h16_q8_ctx{c}:{i}", "probe"),  # probe:fa2_h16_q8_ctx…:2
    "keyvalue with pipes": (lambda b, c, i: f"backend={b}|shape=q8_ctx{c}|iter={i}", None),
}


@pytest.mark.parametrize("style", list(STYLES))
def test_default_grouping_reads_each_style(tmp_path: Path, style: str) -> None:
    name, domain = STYLES[style]
    table = traceattr.open(export(tmp_path / "t.sqlite", name, domain=domain)).calls()
    assert table.height == 3 * len(US)
    assert set(table["backend"]) == {"fa2", "fa3_pertoken"}  # never split at the backend's own "_"
    got = medians(table)
    assert got.keys() == {(b, f"q8_ctx{c}") for b, c in US}
    for (backend, shape), us in got.items():
        assert us == pytest.approx(US[backend, int(shape.removeprefix("q8_ctx"))] + 0.01)  # the middle call of 3
    iters = table["iter"].unique().to_list()
    assert iters == [None] if style.startswith("ctx-terminal") else sorted(iters) == [0, 1, 2]
    assert grouping_note(table) is None


@pytest.mark.parametrize(
    ("preset", "name"),
    [
        ("slash", lambda b, c, i: f"{b}/q8_ctx{c}:{i}"),
        ("pipe", lambda b, c, i: f"{b}|q8_ctx{c}|{i}"),
        ("dot", lambda b, c, i: f"{b}.q8_ctx{c}.{i}"),
        ("underscore", lambda b, c, i: f"{b}_q8_ctx{c}_{i}"),
        ("keyvalue", lambda b, c, i: f"backend={b},shape=q8_ctx{c},arm=A,iter={i}"),
    ],
)
def test_each_preset_reads_its_convention(tmp_path: Path, preset: str, name: object) -> None:
    table = traceattr.open(export(tmp_path / "t.sqlite", name)).calls(group=preset)
    assert table.height == 3 * len(US) and sorted(table["iter"].unique()) == [0, 1, 2]
    assert medians(table).keys() == {(b, f"q8_ctx{c}") for b, c in US}
    assert (table["arm"].unique().to_list() == ["A"]) if preset == "keyvalue" else table["arm"].is_null().all()


def test_shape_labels_are_the_short_form(tmp_path: Path) -> None:
    """A long form and the short form of one shape group together (the grammar decides what a shape is)."""
    names = iter([f"fa2|q8_ctx{c}_h16_b1|{i}" if i % 2 else f"fa2|q8_ctx{c}|{i}" for c in CTXS for i in range(3)])
    table = traceattr.open(export(tmp_path / "t.sqlite", lambda *_: next(names), backends=("fa2",))).calls()
    assert sorted(table["shape"].unique()) == sorted(f"q8_ctx{c}" for c in CTXS)


def test_explicit_regex(tmp_path: Path) -> None:
    trace = export(tmp_path / "t.sqlite", lambda b, c, i: f"[{i}] {b} @ q8_ctx{c}")
    assert grouping_note(traceattr.open(trace).calls()) is not None  # no preset reads it
    group = r"^\[(?P<iter>\d+)\] (?P<backend>\S+) @ (?P<shape>\S+)$"
    table = traceattr.open(trace).calls(group=group)
    assert medians(table).keys() == {(b, f"q8_ctx{c}") for b, c in US} and grouping_note(table) is None


# -- when a grouping cannot support a comparison: one line, no winners --------------------------------
def test_shape_group_that_takes_too_little_is_called_out(tmp_path: Path) -> None:
    trace = export(tmp_path / "t.sqlite", lambda b, c, i: f"{b}/q8_ctx{c}")
    table = traceattr.open(trace).calls(group=r"^(?P<backend>[^/]+)/(?P<shape>q\d+)_ctx(?P<iter>\d+)$")
    note = grouping_note(table)
    assert (
        note is not None and "carry different shapes in their names (q8_ctx131072, q8_ctx262144, q8_ctx32768)" in note
    )


def test_one_backend_per_shape_is_called_out(tmp_path: Path) -> None:
    table = traceattr.open(
        export(tmp_path / "t.sqlite", lambda b, c, i: f"{b}|q8_ctx{c}|{i}", backends=("fa2",))
    ).calls()
    note = grouping_note(table)
    assert note is not None and note.startswith("no shape was measured by two or more backends (4 shape(s)")


def test_compare_prints_the_note_instead_of_winners(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = export(tmp_path / "t.sqlite", lambda b, c, i: f"{b}|q8_ctx{c}|{i}", backends=("fa2",))
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(trace)])
    assert exit_info.value.code == 2  # nothing to compare: the exit-status convention (docs/files.md)
    captured = capsys.readouterr()
    out = captured.out
    assert captured.err.startswith("note: no shape was measured by two or more backends")  # notes on stderr
    assert "per-call GPU time" not in out and "Verdict" not in out  # no winner tables, no rules
    assert "1.00×" not in out and "★" not in out


def test_compare_groups_pipe_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = export(tmp_path / "t.sqlite", lambda b, c, i: f"{b}|q8_ctx{c}|{i}")
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(trace), "--group", "pipe"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.count("per-call GPU time") == len(CTXS)  # one table per shape, two backends in each
    assert "note:" not in out


def test_torch_op_ranges_are_not_compared(exports: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """nsys-ai's PyTorch trace: its aten:: ranges are not backends × shapes, so no tables of 'fastest' ops."""
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(exports["nsysai_h100_2gpu_1s"])])
    assert exit_info.value.code == 2  # nothing to compare (docs/files.md: exit status)
    captured = capsys.readouterr()
    assert captured.out == ""  # notes on stderr: stdout holds answers only
    first, second = captured.err.splitlines()
    assert first.startswith("note: no range name reads as a backend and a shape (e.g. 'aten::")
    # what the loader had to assume is said too, as attribute says it (a sliced capture here)
    assert (
        second == "note: 2276 GPU ops have no launch record in the trace (sliced capture): listed as [no launch record]"
    )


@pytest.mark.slow
def test_report_shows_the_note(tmp_path: Path) -> None:
    att = traceattr.open(
        export(tmp_path / "t.sqlite", lambda b, c, i: f"{b}|q8_ctx{c}|{i}", backends=("fa2",))
    ).attribute()
    note = analyse(att).note
    assert note is not None
    assert '<div class="note">' + html.escape(note) + "</div>" in build_report(att)


# -- bad groupings: one line, exit 2 ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("(?P<backend>x)", "--group: '(?P<backend>x)' is neither a preset"),
        ("(?P<backend>x)(?P<shape>(", "--group: invalid regular expression"),
        ("(?P<backend>zzz)(?P<shape>q)", "read no range with GPU work as backend + shape"),
    ],
)
def test_bad_group_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], group: str, message: str) -> None:
    trace = export(tmp_path / "t.sqlite", lambda b, c, i: f"{b}|q8_ctx{c}|{i}")
    for command in ("compare", "report"):
        with pytest.raises(SystemExit) as exit_info:
            main(
                [
                    command,
                    str(trace),
                    "--group",
                    group,
                    *(["-o", str(tmp_path / "r.html")] if command == "report" else []),
                ]
            )
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "r.html").exists()

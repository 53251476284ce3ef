"""Every table fits its terminal: no line wider than COLUMNS, no number or name cut, the dropped columns named.

The checker reads a screen as a user would: each line's width in cells, and every number on it (a number on a
narrow screen must be a whole number of the wide one: ``163.`` of ``163.8`` or ``2,164`` of ``2,164.5`` is cut).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from tests.helpers import SWEEP, cli, faked_round
from traceattr.present.columns import MIN_WIDTH, Column, dropped_line, fitted_table

# a number standing on its own: not part of a name (192x192, sm90, ctx131k) nor of a longer number
NUMBER = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?![\w])")
SHORTENED = re.compile(r"\S*…")
DIGIT = re.compile(r"\d")
PLAN_FOLDER = re.compile(r"(?:→|folder) (/\S+)")  # a round's or a sweep's plan folder, as its first line names it


def numbers(text: str) -> set[str]:
    return {m.group().rstrip(",") for m in NUMBER.finditer(text)}


def check_screen(narrow: str, wide: str, width: int) -> None:
    """*narrow* (printed at *width* columns) fits and cuts nothing that *wide* (the same, unbounded) shows."""
    too_wide = [line for line in narrow.splitlines() if cell_len(line) > width]
    assert not too_wide, f"{len(too_wide)} lines wider than {width}: {too_wide[:3]}"
    # a number the wide screen does not show is cut when it is the start or the end of one it shows (a time
    # measured anew, such as a report's read seconds, is neither)
    whole = numbers(wide)
    cut = {n for n in numbers(narrow) - whole - {str(width)} if any(w.startswith(n) or w.endswith(n) for w in whole)}
    assert not cut, f"numbers at {width} columns that the wide screen does not show whole: {sorted(cut)[:10]}"
    # a name the wide screen shortens too may be folded here: its last line ends the same
    ends = set(SHORTENED.findall(wide))
    shortened = {t for t in SHORTENED.findall(narrow) if not any(w.endswith(t) for w in ends)}
    assert not shortened, f"cut at {width} columns: {sorted(shortened)[:10]}"


def without_path(text: str, path: str) -> str:
    """*text* less the lines that are pieces of *path* folded to the width: a path longer than the width must
    fold, and its digits are no numbers cut (digits aside in the comparison: a plan's folder is stamped anew)."""
    whole = DIGIT.sub("#", path)
    return "\n".join(line for line in text.splitlines() if not (line.strip() and DIGIT.sub("#", line.strip()) in whole))


def screen(width: int, renderables: list) -> str:
    con = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115 (closed with the console)
    for r in renderables:
        con.print(r)
    text = con.export_text()
    con.file.close()
    return text


COLUMNS = [
    Column("kernel", "left", wraps=True),
    Column("calls"),
    Column("median µs"),
    Column("p10–p90", drop=2),
    Column("reduce", drop=1),
    Column("kernels", drop=3),
]
ROWS = [
    ["nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN", "1,024", "163.8", "160.2–170.4", "17.3", "2"],
    ["flash_fwd_splitkv_mla_kernel", "10", "2,164.5", "2,100.0–2,200.9", "0.0", "1"],
]


@pytest.mark.parametrize("width", [MIN_WIDTH, 30, 40, 60, 80, 100, 200])
def test_a_table_fits_every_width_and_cuts_nothing(width: int) -> None:
    con = Console(width=width)
    table, dropped = fitted_table(con, COLUMNS, ROWS, "Per kernel (µs)")
    wide_table, none = fitted_table(Console(width=512), COLUMNS, ROWS, "Per kernel (µs)")
    assert none == []
    check_screen(screen(width, [table]), screen(512, [wide_table]), width)
    text = screen(width, [table])
    for head in {c.head for c in COLUMNS} - set(dropped):  # every column not named as dropped is there
        assert head.split()[0] in text, (head, text)


def test_secondary_columns_go_first_and_are_named() -> None:
    # wide enough for everything but kernels (drop 3) and p10–p90 (drop 2); reduce (drop 1) stays
    need = 24 + 5 + 9 + 6 + 3 * 4 + 1  # the kernel name folds to 24 (NAME_MIN)
    _, dropped = fitted_table(Console(width=need), COLUMNS, ROWS, "t")
    assert dropped == ["kernels", "p10–p90"]
    out = Console(width=need, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    dropped_line(out, dropped)
    assert out.export_text().startswith(f"not shown at {need} columns: kernels, p10–p90 (--wide")
    out.file.close()


def test_a_dropped_column_comes_back_when_a_wider_one_made_room() -> None:
    # kernels (7 wide) goes first; that alone makes room, so nothing else goes
    need = 24 + 5 + 9 + 15 + 6 + 3 * 5 + 1
    _, dropped = fitted_table(Console(width=need), COLUMNS, ROWS, "t")
    assert dropped == ["kernels"]


def test_too_narrow_for_a_table_prints_records_of_every_column() -> None:
    table, dropped = fitted_table(Console(width=30), COLUMNS, ROWS, "Per kernel (µs)")
    text = screen(30, [table])
    assert dropped == [] and "┃" not in text
    assert "  median µs: 2,164.5" in text and "  kernels: 1" in text
    check_screen(text, screen(512, [fitted_table(Console(width=512), COLUMNS, ROWS, "Per kernel (µs)")[0]]), 30)


def test_checker_catches_cut_numbers_and_wide_lines() -> None:
    with pytest.raises(AssertionError, match="numbers"):
        check_screen("median 163.\n", "median 163.8\n", 80)
    with pytest.raises(AssertionError, match="cut"):
        check_screen("fa3-per-to…\n", "fa3-per-token\n", 80)
    with pytest.raises(AssertionError, match="wider"):
        check_screen("x" * 41, "x" * 41, 40)


# ------------------------------------------------------------- every command, on shipped and public data
WIDTHS = [20, 40, 80, 100]
EXAMPLES = Path(__file__).parents[1] / "examples"
ROUND = EXAMPLES / "rounds" / "h200_smoke_fa2_vs_fa3"  # a real round folder (its second capture's trace not shipped)
SWEEP_FOLDER = EXAMPLES / "sweeps" / "h200_q8_eager"


@pytest.fixture(scope="module")
def folder(exports: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two public exports as one folder of reports."""
    root = tmp_path_factory.mktemp("two")
    for name in ("flameox_graph_rtx3060", "fuser_h200_nsys2024_6"):
        shutil.copyfile(exports[name], root / f"{name}.sqlite")
    return root


def commands(exports: dict[str, Path], folder: Path, round_folder: Path) -> dict[str, list[object]]:
    e = SWEEP
    return {
        "round receipt": ["report", round_folder, "--format", "text"],
        "profile plan": [
            "profile",
            "--shape",
            "q8_ctx900k",
            "--shape",
            "q1_ctx131k_h128",
            "--dry-run",
            "--out-root",
            round_folder.parent / "plans",
        ],
        "sweep plan": [
            "sweep",
            "-s",
            "q8_ctx*",
            "-b",
            "fa3",
            "-b",
            "flashmla",
            "--ctx-range",
            "8k:1m",
            "--dry-run",
            "--out-root",
            round_folder.parent / "plans",
        ],
        "round plan": [
            "round",
            "--rows",
            "smoke",
            "--baseline",
            "fa3",
            "--candidate",
            "fa3[splits=4]",
            "--dry-run",
            "--out-root",
            round_folder.parent / "plans",
        ],
        "shipped round receipt": ["report", ROUND, "--format", "text"],
        "compare round": ["compare", ROUND],
        "compare capture": ["compare", ROUND / "capture-1"],
        "dispatch round": ["dispatch", ROUND],
        "sweep steps": ["report", SWEEP_FOLDER, "--format", "text"],
        "dispatch sweep": ["dispatch", SWEEP_FOLDER],
        "report text": ["report", e, "--format", "text"],
        "attribute ranges": ["attribute", e, "--ranges"],
        "compare": ["compare", e],
        "attribute": ["attribute", e],
        "compare many": ["compare", folder, "-j", "1"],
        "attribute many": ["attribute", folder, "-j", "1"],
        "diff": ["diff", exports["nsysai_mfu_2gpu_before"], exports["nsysai_mfu_2gpu_after"]],
        "dispatch": ["dispatch", e],
        "shapes": ["shapes"],
    }


@pytest.mark.slow
def test_every_command_fits_every_width(
    exports: dict[str, Path],
    folder: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    round_folder = faked_round(tmp_path, monkeypatch)
    capsys.readouterr()
    for name, args in commands(exports, folder, round_folder).items():
        monkeypatch.delenv("COLUMNS", raising=False)
        rc, wide, err = cli(capsys, *args)
        assert rc in (0, 2) and "Traceback" not in err, (name, err)
        for width in WIDTHS:
            monkeypatch.setenv("COLUMNS", str(width))
            rc_w, out, err = cli(capsys, *args)
            assert rc_w == rc and "Traceback" not in err, (name, width, err)
            folder_named = PLAN_FOLDER.search(wide)
            if folder_named:
                out = without_path(out, folder_named[1])
            try:
                check_screen(out, wide, width)
            except AssertionError as e:
                raise AssertionError(f"{name} at {width} columns: {e}") from None
            if width >= 80 and "not shown at" not in wide:
                assert out.count("not shown at") <= out.count("┏") + out.count("per-call")  # one per section at most


@pytest.mark.slow
def test_a_round_run_fits_every_width(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `traceattr round` itself prints (its folder, the runner's lines, the receipt, where the receipts are):
    at 80 columns its receipt was the markdown table, rows broken over lines."""
    monkeypatch.delenv("COLUMNS", raising=False)
    faked_round(tmp_path / "wide", monkeypatch)
    wide = capsys.readouterr().out
    for width in (40, 80, 100):
        monkeypatch.setenv("COLUMNS", str(width))
        faked_round(tmp_path / str(width), monkeypatch)
        out = capsys.readouterr().out
        check_screen(out, wide, width)
        assert ("┏" in out) == (width >= 80) and "| row |" not in out and "receipt.md" in out  # 40: records


@pytest.mark.parametrize("columns", ["0", "1", str(MIN_WIDTH - 1)])
def test_a_width_too_narrow_is_refused_in_one_line(
    columns: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    rc, out, err = cli(capsys, "shapes")
    assert rc == 2 and out == "" and err.count("\n") == 1 and f"COLUMNS={columns}" in err


def test_a_huge_width_prints_the_wide_screen(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    _, wide, _ = cli(capsys, "shapes")
    monkeypatch.setenv("COLUMNS", str(10**12))
    rc, out, _ = cli(capsys, "shapes")
    assert rc == 0 and numbers(out) == numbers(wide)


@pytest.mark.slow
def test_the_phase_tables_fit_80_and_100_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """compare of a stamped run folder, diff of two, a stamped round's receipt: the phase tables (docs/phases.md)."""
    from tests.synth.stamped import INKERNEL, REDUCE, stamped_folder, stamped_round

    run_a = stamped_folder(tmp_path / "a", (REDUCE,), seed=1).folder
    run_b = stamped_folder(tmp_path / "b", (INKERNEL,), seed=2).folder
    both = stamped_folder(tmp_path / "both", (REDUCE, INKERNEL), seed=3).folder
    round_folder = stamped_round(tmp_path / "round", captures=2, report=False)
    capsys.readouterr()
    for args in (["compare", both], ["diff", run_a, run_b], ["report", round_folder, "--format", "text"]):
        monkeypatch.delenv("COLUMNS", raising=False)
        rc, wide, err = cli(capsys, *args)
        assert rc == 0 and "split_kv:merged" in wide, (args, err)
        for width in (80, 100):
            monkeypatch.setenv("COLUMNS", str(width))
            rc_w, out, err = cli(capsys, *args)
            assert rc_w == 0, (args, width, err)
            check_screen(out, wide, width)
            assert "split_kv:merged" in out


def test_a_folded_path_is_no_cut_number_but_the_rest_is_checked() -> None:
    wide = "plan: 4 rows → /tmp/p-9/plans/20261207-131724_round_a\n  3 captures × 20 iterations\n"
    narrow = "plan: 4 rows →\n/tmp/p-9/plans/20261\n207-131725_round_a\n  3 captures × 2\n"  # stamped a second later
    kept = without_path(narrow, "/tmp/p-9/plans/20261207-131724_round_a")
    assert kept == "plan: 4 rows →\n  3 captures × 2"
    with pytest.raises(AssertionError, match=r"not show whole: \['2'\]"):  # "20" cut to "2" is still caught
        check_screen(kept, wide, 20)

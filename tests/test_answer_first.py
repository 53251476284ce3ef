"""The answer first (issue 18, terminal half): compare opens on its verdict, every table fits the terminal with
no cell cut, attribute lists call series, notes on stderr, one exit-status convention, --group on domain:message."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.synth.builder import TraceBuilder
from traceattr.cli import main
from traceattr.present.formats import rule_margins, times_with_interval, win_text

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "examples" / "traces" / "h200_mla_sweep.sqlite"
EXAMPLES = sorted((ROOT / "examples" / "traces").glob("*.sqlite"))
# rich's cut: a cell that ends in "…" right before its border (display names' "<…>" is not a cut)
CUT = re.compile(r"…\s*[│┃]")


def sweep_export(path: Path, domain: str) -> Path:
    """Ranges ``domain:<backend>|q8_ctx<ctx>|<i>`` with one kernel each: fa3 is 10 µs faster at every ctx."""
    b = TraceBuilder()
    dom = b.domain(domain, tid=1)
    t = 1_000_000
    for ctx in (32768, 131072):
        for i in range(4):
            for backend, us in (("fa2", 40 + ctx // 512), ("fa3", 30 + ctx // 512)):
                b.push_range(tid=1, start=t, end=t + 5_000, message=f"{backend}|q8_ctx{ctx}|{i}", domain=dom)
                gpu = t + 10_000
                b.launch(tid=1, start=t + 1_000, end=t + 1_500, kernel="void attn_kernel<64>(Params)",
                         gpu_start=gpu, gpu_end=gpu + 1_000 * us + 10 * i)  # fmt: skip
                t = gpu + 1_000 * us + 50_000
    return b.write(path)


def run(*args: str, columns: int | None = 100) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "traceattr", *args], capture_output=True, text=True, env=env,
                          check=False)  # fmt: skip


def _fits(text: str, width: int) -> None:
    wide = [line for line in text.splitlines() if len(line) > width]
    assert not wide, f"{len(wide)} lines wider than {width}: {wide[0]!r}"
    cut = [line for line in text.splitlines() if CUT.search(line)]
    assert not cut, f"cut cells: {cut[0]!r}"


@pytest.mark.slow
@pytest.mark.parametrize("width", [100, 80])
def test_compare_fits_and_opens_on_the_verdict(width: int) -> None:
    out = run("compare", str(SWEEP), columns=width)
    assert out.returncode == 0, out.stderr
    _fits(out.stdout, width)
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Verdict")
    assert lines[1].strip() == "q8_ctx*: fa3 below ≈238k ctx, flashmla above (measured at 131k and 512k)"
    assert lines[2].strip() == "at 131k fa3 wins by 1.07× [1.06–1.09]"
    assert lines[3].strip() == "at 512k flashmla wins by 1.09× [1.08–1.10]"
    assert lines[8].split() == ["q8_ctx900k_h16_b1_bf16_p64", "flashmla", "wins", "by", "1.10×", "[1.10–1.11]",
                                "over", "fa3"]  # fmt: skip
    # every backend name and median whole; what gave way is named, with how to see it
    for cell in ("fa3-per-token", "2,164.9", "1,537.5"):
        assert cell in out.stdout
    # reduce and overlap (FlashMLA's combine kernel against fa3's in-kernel merge) give way last
    assert "┃ reduce ┃ overlap ┃" in out.stdout
    assert ("2,160.6–2,177.3" in out.stdout) == (width == 100)  # the spread gives way before them at 80
    assert f"not shown at {width} columns: kernels, roofline" in out.stdout and "--wide" in out.stdout
    assert "note:" not in out.stdout and "NVTX names longer" not in out.stderr


@pytest.mark.slow
def test_compare_wide_and_piped_without_columns_show_every_column() -> None:
    for out in (run("compare", str(SWEEP), "--wide"), run("compare", str(SWEEP), columns=None)):
        assert out.returncode == 0, out.stderr
        assert "roofline" in out.stdout and "kernels" in out.stdout and "not shown at" not in out.stdout
        assert not CUT.search(out.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("width", [100, 80])
def test_attribute_fits(width: int) -> None:
    out = run("attribute", str(SWEEP), columns=width)
    assert out.returncode == 0, out.stderr
    _fits(out.stdout, width)
    assert "GPU time per call series" in out.stdout and "not shown at" in out.stdout


@pytest.mark.slow
def test_attribute_lists_one_row_per_call_series() -> None:
    out = run("attribute", str(SWEEP), "--wide")
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if "traceattr:backend=" in line]
    assert len(rows) == 20  # 4 backends × 5 shapes, not 200 iterations
    assert all(" arm=" not in r and " iter=" not in r for r in rows)
    assert all(r.split("│")[2].strip() == "10" for r in rows)  # each series holds its 10 calls
    assert "more call series" not in out.stdout
    each = run("attribute", str(SWEEP), "--ranges", "--limit", "0", "--wide")
    assert sum("iter=" in line for line in each.stdout.splitlines()) == 200  # --ranges: every instance


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_no_false_long_name_note_on_the_examples(path: Path) -> None:
    out = run("attribute", str(path), "--limit", "1")
    assert out.returncode == 0, out.stderr
    assert "NVTX names longer" not in out.stderr + out.stdout


@pytest.mark.slow
def test_notes_go_to_stderr_and_nothing_to_compare_exits_2(exports: dict[str, Path]) -> None:
    out = run("compare", str(exports["nsysai_mfu_2gpu_before"]))
    assert out.returncode == 2
    assert out.stderr.startswith("note: no range name reads as a backend and a shape")
    assert "op_id =" not in out.stderr  # the examples are call series: 'aten::to', not 'aten::to, op_id ='
    assert "note:" not in out.stdout and "aten::" not in out.stdout  # no table of aten:: "shapes" × "backends"


@pytest.mark.slow
@pytest.mark.parametrize("option", [["--domain", "nosuch"], ["--match", "nomatch"]])
@pytest.mark.parametrize("command", ["attribute", "compare"])
def test_a_filter_that_chooses_nothing_is_refused(command: str, option: list[str]) -> None:
    out = run(command, str(SWEEP), *option)
    assert out.returncode == 2 and out.stdout == ""
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and f"no NVTX range matches {option[0]} '{option[1]}'" in err[0]
    assert "domains here: 'traceattr'" in err[0] and "a name here reads" in err[0]


@pytest.mark.slow
def test_compare_domain_rules_and_csv(tmp_path: Path) -> None:
    rules = tmp_path / "roles.toml"
    rules.write_text('version = 1\n[[rule]]\nrole = "attention"\npattern = "flash_fwd_mla_combine"\n', encoding="utf-8")
    out = run("compare", str(SWEEP), "--domain", "traceattr", "--rules", str(rules), "--format", "csv")
    assert out.returncode == 0, out.stderr
    table = pl.read_csv(out.stdout.encode())
    assert table.height == 20 and {"shape", "backend", "median_us", "verdict"} <= set(table.columns)
    flashmla = table.filter(pl.col("backend") == "flashmla")
    assert (flashmla["reduce_exposed_us"] == 0).all()  # the rules file made the combine kernel attention
    js = run("compare", str(SWEEP), "--format", "json")
    assert js.returncode == 0 and pl.read_json(js.stdout.encode()).height == 20


def test_group_regex_on_domain_and_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = sweep_export(tmp_path / "t.sqlite", "sweep")
    as_nsys_shows = r"^sweep:(?P<backend>[^|]+)\|(?P<shape>[^|]+)\|(?P<iter>\d+)$"
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(trace), "--group", as_nsys_shows])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("Verdict") and "fa3 wins by" in out
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(trace), "--group", r"^nope:(?P<backend>\w+)\|(?P<shape>\w+)$"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "a name here reads 'sweep:fa" in err and "(message 'fa" in err


@pytest.mark.slow
def test_profile_help_keeps_its_brackets() -> None:
    out = run("profile", "--help", columns=200)
    assert "[label=]backend[options]" in out.stdout and "'fa3[splits=4]'" in out.stdout


@pytest.mark.slow
def test_profile_ranks_and_round_refuse_before_starting(tmp_path: Path) -> None:
    try:
        import torch  # noqa: F401

        pytest.skip("a GPU machine may run them")
    except ImportError:
        pass
    ranks = run("profile", "--shape", "q8_ctx1m_dcp2", "--ranks", "2", "--out-root", str(tmp_path / "p"))
    assert ranks.returncode == 2 and "cannot profile" in ranks.stderr
    assert not (tmp_path / "p").exists()  # no run folder, no rank logs: nsys never started
    rnd = run("round", "--rows", "smoke", "--baseline", "fa3", "--candidate", "fa2", "--out-root", str(tmp_path / "r"))
    assert rnd.returncode == 2 and "cannot profile" in rnd.stderr
    assert not (tmp_path / "r").exists()  # checked first: no empty round folder


def test_formats_of_the_verdict() -> None:
    assert times_with_interval(1.0693, 1.0614, 1.0839) == "1.07× [1.06–1.08]"
    assert times_with_interval(1.0693, None, 1.08) == "1.07×"
    assert win_text("fa3", 1.0693, 1.0614, 1.0839, "flashmla") == "fa3 wins by 1.07× [1.06–1.08] over flashmla"
    row = {"decided": True, "faster_below": "fa3", "faster_above": "flashmla", "ctx_low": 131_000,
           "ctx_high": 512_000, "ratio_at_low": 1.0693, "ratio_at_low_lo": 1.0614, "ratio_at_low_hi": 1.0839,
           "ratio_at_high": 0.9173, "ratio_at_high_lo": 0.9073, "ratio_at_high_hi": 0.9238}  # fmt: skip
    # above the crossing the margin is the inverse: t(fa3) / t(flashmla) = 1 / 0.9173
    assert rule_margins(row) == ("at 131k fa3 wins by 1.07× [1.06–1.08]", "at 512k flashmla wins by 1.09× [1.08–1.10]")
    assert rule_margins({**row, "decided": False}) == ()


@pytest.mark.slow
def test_readme_quick_start_output_is_what_compare_prints() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("Output of the first", 1)[1].split("```", 2)[1]
    out = run("compare", str(SWEEP), columns=100).stdout.splitlines()
    stripped = {line.rstrip() for line in out}
    shown = [line for line in block.strip("\n").splitlines() if line != "…"]
    assert shown and all(line in stripped for line in shown), [line for line in shown if line not in stripped]
    assert block.strip("\n").splitlines()[0] == out[0]

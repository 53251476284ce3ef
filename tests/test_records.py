"""Run-folder records as input: every edit of a receipt, plan or runner record ends in one line, never a traceback."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import round_plan
from traceattr.analysis.rounds import Row
from traceattr.cli import main
from traceattr.core.errors import TraceError
from traceattr.core.records import ReceiptRecord, RunnerRecord, RunPlan, RunRecord, read_object
from traceattr.core.shapes import parse_shape
from traceattr.jobs.round import read_receipt

SHAPE = parse_shape("q1_ctx8k").name


def receipt(tmp: Path) -> dict[str, Any]:
    """A receipt.json as round writes it, one refused row (so --retry has work), built at test time."""
    plan = round_plan(rows=(Row("q1_ctx8k", SHAPE),), baseline="fa3", candidate="fa3[splits=4]", folder=tmp / "r",
                     max_noise=0.005, max_iters=500)  # fmt: skip
    row = {"row": "q1_ctx8k", "shape": SHAPE, "attempt": 1, "status": "refused", "refused_by": "clock 0.50 < 0.7",
           "baseline_us": 100.0, "candidate_us": 90.0, "ratio": 0.9, "low": 0.89, "high": 0.91, "verdict": "faster",
           "captures": 3, "pairs": 24, "iters_captures": [8, 8, 8], "noise": 0.001,
           "baseline_captures_us": [100.0, 100.0, 100.0], "candidate_captures_us": [90.0, 90.0, 90.0],
           "flagged": False}  # fmt: skip
    return {**plan.header(), "summary": {}, "captures": [], "rows": [row]}


def retry(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["round", "--retry", str(path), "--dry-run", "--out-root", str(path.parent / "out")])
    return int(exit_info.value.code or 0), capsys.readouterr().err


def _set(*keys: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(content: dict[str, Any]) -> None:
        target = content
        for k in keys[:-1]:
            target = target[k] if not isinstance(target, list) else target[int(k)]
        target[int(keys[-1]) if isinstance(target, list) else keys[-1]] = value

    return edit


EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "captures as text": (_set("protocol", "captures", value="abc"), "protocol.captures must be an integer"),
    "captures unbounded": (_set("protocol", "captures", value=10**9), "protocol.captures must lie in [1, 1000]"),
    "hold_us null": (_set("protocol", "hold_us", value=None), "protocol.hold_us must not be null"),
    "protocol a list": (_set("protocol", value=[1, 2]), "protocol must be an object"),
    "arms a string": (_set("arms", value="fa3"), "arms must be an object"),
    "negative directional limit": (_set("gates", "directional_limit", value=-0.02), "gates.directional_limit"),
    "confidence 1.5": (_set("gates", "confidence", value=1.5), "gates.confidence must lie in (0, 1)"),
    "missing baseline": (lambda c: c.pop("baseline"), "baseline is missing"),
    "rows a string": (_set("rows", value="rows"), "rows must be a list"),
    "a row a number": (_set("rows", "0", value=7), "rows[0] must be an object"),
    "ratio as text": (_set("rows", "0", "ratio", value="abc"), "rows[0].ratio must be a number"),
    "attempt as text": (_set("rows", "0", "attempt", value="1"), "rows[0].attempt must be an integer"),
    "lists of text": (_set("rows", "0", "iters_captures", value=["8"]), "rows[0].iters_captures[0] must be an integer"),
    "status unknown": (_set("rows", "0", "status", value="maybe"), "rows[0].status must be pass or refused"),
    "a later schema": (_set("schema", value="traceattr.receipt/9"), "this traceattr reads 'traceattr.receipt/2'"),
    "not a round": (_set("command", value="profile"), "not a traceattr round receipt"),
    "retry rounds": (_set("retry_captures", value=[-1]), "retry_captures[0] must lie in [1, 1000]"),
}


def test_a_receipt_as_written_retries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt(tmp_path)), encoding="utf-8")  # no schema key: written before schemas
    code, err = retry(path, capsys)
    assert code == 0 and not err
    record = ReceiptRecord.read(path)
    assert record.to_json()["schema"] == "traceattr.receipt/2" and record.captures_done == 3
    assert ReceiptRecord.from_json(record.to_json()) == record  # with the key, as written now


def test_a_receipt_of_schema_1_reads_its_rounds_as_captures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # /1 called a round's captures "rounds"; the facts are the same, read under today's names
    new = receipt(tmp_path)
    old = json.loads(json.dumps(new))
    old["schema"] = "traceattr.receipt/1"
    old["protocol"]["rounds"] = old["protocol"].pop("captures")  # /1 data
    old["protocol"]["arm_order"] = "alternating between rounds"  # /1 data
    old["retry_rounds"] = [2]  # /1 data
    row = old["rows"][0]
    for key in ("captures", "iters_captures", "baseline_captures_us", "candidate_captures_us"):
        row[key.replace("captures", "rounds")] = row.pop(key)  # /1 data
    record = ReceiptRecord.from_json(old, tmp_path / "receipt.json")
    assert record.rows[0]["captures"] == 3 and record.rows[0]["iters_captures"] == [8, 8, 8]
    assert record.rows[0]["baseline_captures_us"] == [100.0] * 3 and "rounds" not in record.rows[0]
    assert record.round_captures == 3 and record.captures_done == 3 + 2
    assert record.header["protocol"]["arm_order"] == "alternating between captures"
    assert record.to_json()["schema"] == "traceattr.receipt/2"
    again = ReceiptRecord.from_json(record.to_json())
    assert again.rows == record.rows and again.header == record.header
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    code, err = retry(path, capsys)  # and a retry of it plans as of a receipt written today
    assert code == 0 and not err


@pytest.mark.parametrize("name", sorted(EDITS))
def test_an_edited_receipt_is_one_line(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit, message = EDITS[name]
    content = receipt(tmp_path)
    edit(content)
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    code, err = retry(path, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(path) in err and message in err, err


@pytest.mark.slow
def test_deep_nesting_and_a_fifo_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"rows": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    code, err = retry(deep, capsys)
    assert code == 2 and "nested too deeply" in err and len(err.strip().splitlines()) == 1
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    # in a child process, so a regression blocks a timeout rather than the suite
    out = subprocess.run([sys.executable, "-m", "traceattr", "round", "--retry", str(fifo), "--dry-run"],
                         capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert out.returncode == 2 and "not a regular file" in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--confidence", "0"], "confidence level must lie in (0, 1)"),
        (["--confidence", "1.5"], "confidence level must lie in (0, 1)"),
        (["--confidence", "nan"], "confidence level must lie in (0, 1)"),
        (["--same-within", "-1"], "'same' tolerance must be a number ≥ 0"),
        (["--same-within", "nan"], "'same' tolerance must be a number ≥ 0"),
        (["--directional-limit", "inf"], "directional-disagreement limit must be a positive number"),
        (["--directional-limit", "-1"], "directional-disagreement limit must be a positive number"),
        (["--warmup", "-1"], "--warmup must be at least 1"),
        (["--flush-mb", "-1"], "--flush-mb must be positive"),
        (["--captures", "1000000000"], "--captures must be at most 1000"),
    ],
)
def test_round_options_are_range_checked(option: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["round", "--rows", "smoke", "--baseline", "fa3", "--candidate", "fa3[splits=4]", *option, "--dry-run"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_plan_json_schema_old_and_new(tmp_path: Path) -> None:
    plan = RunPlan(shapes=("s",), arms=("fa3", "fa2"), iters=8, max_noise=0.01, max_iters=40)
    path = plan.write(tmp_path / "plan.json")
    content = json.loads(path.read_text(encoding="utf-8"))
    assert content["schema"] == "traceattr.plan/1" and RunPlan.read(path) == plan
    content.pop("schema")  # written before schemas: version 1
    assert RunPlan.from_json(content) == plan
    for edit, message in (({"iters": "8"}, "iters must be an integer"), ({"shapes": "s"}, "shapes must be a list"),
                          ({"nope": 1}, "unknown field 'nope'"), ({"schema": "traceattr.plan/2"}, "reads")):  # fmt: skip
        with pytest.raises(TraceError, match=message):
            RunPlan.from_json({**content, **edit}, tmp_path / "plan.json")


def runner_json() -> dict[str, Any]:
    """runner.json exactly as traceattr.runner.loop writes it (its docstring), incl. NaN and None values."""
    return {
        "gpu": {"name": "NVIDIA H200", "max_sm_clock_mhz": 1980}, "versions": {"torch": "2.8"},
        "plan": {"shapes": [SHAPE], "arms": ["fa3"], "flush_bytes": 128 << 20},
        "protocol": {"between": "flush", "order": "abba", "flush_bytes": 256 << 20, "graphs": False, "hold_us": 0.0},
        "arms": {"fa3": {"backend": "fa3", "options": {}, "program": "fa3"}},
        "shapes": {SHAPE: {"kv_bytes": 1, "backends": {
            "fa3": {"arm": "A", "status": "ok", "notes": [], "prepare_s": 1.0, "relative_error": math.nan,
                    "output_sha256": "ab" * 32},
            "fa2": {"arm": "B", "status": "unavailable", "reason": "not built"}},
            "clocks": {"sm_clock_mhz_median": None, "sm_clock_max_mhz": None, "fraction": None, "samples": 0},
            "sampling": {"iters": 20, "max_noise": None, "noise": {"fa3": None}}}},
        "timed": True,
        "events": [{"backend": "fa3", "shape": SHAPE, "iter": 0, "event_us": 25.1}],
        "clocks": {"samples": 3, "sm_clock_mhz_median": 1500, "low_clock": True},
    }  # fmt: skip


def test_runner_record_reads_what_the_runner_writes(tmp_path: Path) -> None:
    path = tmp_path / "runner.json"
    path.write_text(json.dumps(runner_json(), indent=2, default=str) + "\n", encoding="utf-8")
    r = RunnerRecord.read(path)
    assert r.timed and r.flush_bytes == 256 << 20 and r.low_clock_mhz == 1500 and len(r.events) == 1
    assert r.check(SHAPE, "fa2").reason == "not built" and r.check(SHAPE, "nope").status is None
    assert r.shape(SHAPE).clocks.loaded_fraction is None and r.arms["fa3"].program == "fa3"
    assert r.to_json() == json.loads(path.read_text(encoding="utf-8"))  # the runner's file, no key of ours added
    bad = runner_json()
    bad["shapes"][SHAPE]["backends"]["fa3"]["relative_error"] = "small"
    with pytest.raises(TraceError, match=r"runner\.json: .*relative_error must be a number"):
        RunnerRecord.from_json(bad, path)


def test_runner_record_reads_each_shapes_hold(tmp_path: Path) -> None:
    content = runner_json()
    content["shapes"][SHAPE]["hold"] = {"groups": 12, "timeouts": 1, "gpu_wait_us": {"median": 2.5, "max": 9.0},
                                        "group_enqueue_us": {"median": 40.0, "max": 60.0}, "call_enqueue_us": {}}  # fmt: skip
    hold = RunnerRecord.from_json(content).shape(SHAPE).hold
    assert (hold.groups, hold.timeouts, hold.gpu_wait_us) == (12, 1, 2.5)
    assert RunnerRecord.from_json(runner_json()).shape(SHAPE).hold.groups == 0  # no hold recorded
    content["shapes"][SHAPE]["hold"]["timeouts"] = "one"
    with pytest.raises(
        TraceError, match=r"runner\.json: unreadable runner record \(shapes\..*\.hold\.timeouts must be"
    ):
        RunnerRecord.from_json(content, tmp_path / "runner.json")


def test_the_protocol_as_the_runner_ran_it_is_typed(tmp_path: Path) -> None:
    content = runner_json()
    content["protocol"].update(flush_kind="fill+evict", hold="host", lead=True)
    ran = RunnerRecord.from_json(content).protocol
    assert (ran.hold, ran.lead, ran.flush_kind, ran.flush_bytes) == ("host", True, "fill+evict", 256 << 20)
    assert RunnerRecord.from_json({"timed": False}).protocol.hold is None  # a runner that did not say
    content["protocol"]["hold"] = "maybe"
    with pytest.raises(TraceError, match=r"runner\.json: unreadable runner record \(protocol\.hold must be one of"):
        RunnerRecord.from_json(content, tmp_path / "runner.json")
    edited = receipt(tmp_path)
    edited["runner"] = {"protocol": {"lead": "yes"}}
    with pytest.raises(TraceError, match=r"runner\.protocol\.lead must be true or false"):
        ReceiptRecord.from_json(edited, tmp_path / "receipt.json")


def test_sweep_steps_read_as_records(tmp_path: Path) -> None:
    from traceattr.core.records import SweepRecord

    path = Path(__file__).parents[1] / "examples" / "sweeps" / "h200_q8_fa3_flashmla_eager.json"
    record = SweepRecord.read(path)
    first = record.steps_taken[0]
    assert first.step == 1 and first.points[0].ctx == record.steps[0]["points"][0]["ctx"]
    assert first.points[0].medians_us == record.steps[0]["points"][0]["medians_us"]
    assert record.below in first.points[0].medians_us and record.seconds > 0
    bad = json.loads(path.read_text(encoding="utf-8"))
    bad["steps"][0]["points"][0]["verdict"] = 3
    with pytest.raises(
        TraceError, match=r"sweep\.json: unreadable sweep record \(steps\[0\]\.points\[0\]\.verdict must be text"
    ):
        SweepRecord.from_json(bad, tmp_path / "sweep.json")


def test_run_record_keeps_every_fact_and_adds_only_its_schema(tmp_path: Path) -> None:
    facts = {"tool": "traceattr", "command": "profile", "version": "0.1.0", "argv": ["traceattr"], "notes": [],
             "outputs": ["calls.csv"], "gpu": {"name": "H200"}}  # fmt: skip
    record = RunRecord.of(facts)
    assert record.to_json() == {"schema": "traceattr.run/1", **facts} and record.outputs == ("calls.csv",)
    assert RunRecord.from_json(record.to_json()).facts == facts  # the report shows the facts, not the schema
    with pytest.raises(TraceError, match="argv"):
        RunRecord.from_json({**facts, "argv": "traceattr"})


def test_json_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("[1]", encoding="utf-8")
    with pytest.raises(TraceError, match="expected a JSON object"):
        read_object(path)
    (tmp_path / "receipt.json").write_bytes(b"\xff")
    with pytest.raises(TraceError, match="unreadable receipt"):
        read_receipt(tmp_path / "receipt.json")

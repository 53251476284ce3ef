"""The file trajectory (``traceattr decode --trajectory file --seq-lens FILE``): batches of seq_lens from a serving
log, read as untrusted input (one line naming the file, the line and the value), driving the dispatcher (fake
arms) and its receipt; no GPU."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.helpers import page_figures, run
from traceattr.core.errors import TraceattrError
from traceattr.jobs.decode import (
    DISPATCHER,
    DecodeConfig,
    DecodeResult,
    config_for_file,
    file_steps,
    result_from_json,
    result_json,
    result_markdown,
    trajectory_of,
)
from traceattr.jobs.decode_report import decode_page
from traceattr.jobs.decode_summary import summarize
from traceattr.runtime import trajectory
from traceattr.runtime.dispatcher import Dispatcher
from traceattr.runtime.select import key_ctx
from traceattr.runtime.table import FamilyKey, FamilyTable, Segment, table_doc
from traceattr.runtime.trajectory import parse_seq_lens, read_seq_lens

LOG = """# a serving log: one decode step's batch a line
8192, 9000
130000 131072

200000,\t12   # trailing comment
"""
TABLE = FamilyTable(
    "q8_ctx*_b2", FamilyKey(8, 16, 2), (Segment(None, 150_000, "fa3"), Segment(150_000, None, "flashmla"))
)


def test_batches_comments_and_separators() -> None:
    assert parse_seq_lens(LOG, "log.txt") == ((8192, 9000), (130000, 131072), (200000, 12))
    assert parse_seq_lens("7\n", "one") == ((7,),)
    assert parse_seq_lens("5\r\n6\r\n", "crlf") == ((5,), (6,))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("8192 9000\n1e5 3\n", "log.txt:2: seq_len '1e5' is not a whole number of tokens (digits 0-9 only)"),
        ("-3\n", "log.txt:1: seq_len '-3' is not a whole number"),
        ("+3\n", "log.txt:1: seq_len '+3' is not a whole number"),
        ("12.5\n", "log.txt:1: seq_len '12.5' is not a whole number"),
        ("1_000\n", "log.txt:1: seq_len '1_000' is not a whole number"),
        ("0x10\n", "log.txt:1: seq_len '0x10' is not a whole number"),
        ("\u0661\u0662\n", "log.txt:1: seq_len '١٢' is not a whole number"),  # int() would read 12
        ("5\n\n\n12\u202e34\n", "log.txt:4: seq_len '12\\u202e34' is not a whole number"),  # bidi: escaped
        ("nan\n", "log.txt:1: seq_len 'nan' is not a whole number"),
        ("0\n", "log.txt:1: seq_len 0: a decode request attends to at least 1 token"),
        ("4194305\n", "log.txt:1: seq_len 4,194,305 exceeds 4,194,304 tokens"),
        ("9" * 5000 + "\n", "log.txt:1: seq_len '999999999999999999999999…' exceeds 4,194,304 tokens"),
        ("1 2\n3 4\n5\n", "log.txt:3: 1 request(s), line 1 has 2: one batch size a file"),
        (" ".join(["1"] * 257) + "\n", "log.txt:1: 257 requests in one batch, more than 256"),
        ("# nothing\n\n", "log.txt: no batch of seq_lens (one batch a line"),
        ("", "log.txt: no batch of seq_lens"),
        (" ".join(["4194304"] * 17) + "\n", "log.txt: 17 requests × the longest seq_len 4,194,304 = 71,303,168 tokens"),
    ],
)
def test_bad_batches_are_refused_naming_the_line_and_value(text: str, message: str) -> None:
    with pytest.raises(TraceattrError) as err:
        parse_seq_lens(text, "log.txt")
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_files_are_read_as_untrusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "log.txt"
    good.write_text(LOG, encoding="utf-8")
    assert read_seq_lens(good)[1] == (130000, 131072)
    with pytest.raises(TraceattrError, match=rf"^{tmp_path / 'missing.txt'}: unreadable"):
        read_seq_lens(tmp_path / "missing.txt")
    with pytest.raises(TraceattrError, match=rf"^{tmp_path}: not a file"):
        read_seq_lens(tmp_path)
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"8192\n\xe9\n")
    with pytest.raises(TraceattrError, match=r"latin.txt: not UTF-8 text \(byte 5\)$"):
        read_seq_lens(latin)
    monkeypatch.setattr(trajectory, "MAX_BYTES", 16)
    with pytest.raises(
        TraceattrError, match=rf"log.txt: {len(LOG.encode())} bytes, more than 16 for a list of batches"
    ):
        read_seq_lens(good)
    monkeypatch.setattr(trajectory, "MAX_BYTES", 1 << 20)
    monkeypatch.setattr(trajectory, "MAX_STEPS", 2)
    with pytest.raises(TraceattrError, match=r"log.txt:5: more than 2 batches"):
        read_seq_lens(good)


def test_the_config_is_the_files(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text(LOG, encoding="utf-8")
    cfg = config_for_file(str(log), q=8, table="t.json")
    assert (cfg.batch, cfg.start, cfg.stop, cfg.steps, cfg.trajectory) == (2, 12, 200_000, 3, "file")
    assert trajectory_of(cfg) == ((8192, 9000), (130000, 131072), (200000, 12))
    assert config_for_file(str(log), q=8, batch=2).batch == 2  # the file's size, given: fine
    with pytest.raises(TraceattrError, match=r"log.txt: its batches hold 2 request\(s\): drop --batch or make it 2"):
        config_for_file(str(log), q=8, batch=4)
    same = tmp_path / "same.txt"
    same.write_text("4096\n4096\n", encoding="utf-8")
    with pytest.raises(TraceattrError, match="every seq_len is 4,096: a grid needs a ctx range"):
        config_for_file(str(same), q=8)
    assert config_for_file(str(same), q=8, table="t.json").steps == 2
    log.write_text(LOG + "5 6\n", encoding="utf-8")  # edited after the run was configured
    with pytest.raises(TraceattrError, match=r"log.txt: changed since the run was configured"):
        file_steps(cfg)
    with pytest.raises(TraceattrError, match="go together"):
        DecodeConfig(q=8, trajectory="file")


class FakeArm:
    """Records what the dispatcher asks of it."""

    def __init__(self, label: str) -> None:
        self.label, self.updates = label, []  # type: ignore[var-annotated]

    def update(self, seq_lens: Sequence[int]) -> None:
        self.updates.append(tuple(seq_lens))

    def replay(self) -> str:
        return f"out of {self.label}"


@pytest.mark.parametrize(("rule", "chosen"), [("max", ["fa3", "fa3", "flashmla"]), ("mean", ["fa3", "fa3", "fa3"])])
def test_the_dispatcher_serves_the_files_batches(rule: str, chosen: list[str]) -> None:
    arms = {a: FakeArm(a) for a in ("fa3", "flashmla")}
    d = Dispatcher(TABLE, arms, rule=rule)  # type: ignore[arg-type]
    steps = parse_seq_lens(LOG, "log.txt")
    outs = [d.step(s) for s in steps]
    assert d.chosen == chosen and outs == [f"out of {a}" for a in chosen]
    # the ragged (200000, 12) keys at 200,000 (max: flashmla) or 100,006 (mean: fa3); the arm gets the batch as logged
    assert key_ctx(steps[2], rule) == (200_000 if rule == "max" else 100_006)  # type: ignore[arg-type]
    assert sum(len(a.updates) for a in arms.values()) == 3 and (200000, 12) in arms[chosen[2]].updates


def _file_result(log: Path) -> DecodeResult:
    fa3 = [[10.0, 10.2, 9.8, 10.0], [100.0, 100.0, 101.0, 100.0], [120.0, 121.0, 119.0, 120.0]]
    fmla = [[12.0, 12.0, 12.0, 12.0], [95.0, 95.0, 95.0, 95.0], [110.0, 110.0, 110.0, 110.0]]
    chosen = ["fa3", "fa3", "flashmla"]  # the table's, by max: 9,000, 131,072, 200,000
    times = {"fa3": fa3, "flashmla": fmla, DISPATCHER: [fa3[0], fa3[1], fmla[2]]}
    cfg = config_for_file(str(log), q=8, table="t.json", iters=4)
    steps = list(trajectory_of(cfg))
    s = summarize(times, ("fa3", "flashmla"), DISPATCHER, chosen, [max(x) for x in steps])
    fp = {"buffers_bytes": 1 << 20, "capture_bytes": 0, "reserved_bytes": 2 << 20, "driver_bytes": 0}
    return DecodeResult(
        config=cfg, table_source="t.json (graphs; family q8_ctx*_b2)", table_doc=table_doc("t", "graphs", [TABLE]),
        summary=s, others={}, graphs={"fa3": 1, "flashmla": 1, DISPATCHER: 2},
        memory={"fa3": {"fa3": fp}, "flashmla": {"flashmla": fp}, DISPATCHER: {"fa3": fp, "flashmla": fp}},
        host=[], equal={}, steps=steps, grid=None, times_us=times, wall_s=1.0,
    )  # fmt: skip


def test_a_file_receipt_says_its_source_reads_back_and_draws(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text(LOG, encoding="utf-8")
    r = _file_result(log)
    md = result_markdown(r)
    assert f"(batches of seq_lens from `{log}`, one a line; the ctx column is the longest request)" in md
    assert "| 131,072 | 100.0 | 95.0 | 100.0 | fa3 | flashmla |" in md  # below the breakpoint, flashmla was faster
    doc = json.loads(json.dumps(result_json(r)))
    assert doc["config"]["seq_lens"] == str(log) and doc["steps"][2] == [200000, 12]
    log.unlink()  # the receipt holds its steps: reading it back needs no log
    back = result_from_json(doc)
    assert result_markdown(back) == md
    fig = page_figures(decode_page(back, "file").decode())["fig-trajectory"]
    assert {t["mode"] for t in fig["data"]} == {"markers"}  # ragged batches are not a curve in ctx
    assert next(t["x"] for t in fig["data"]) == [9000, 131072, 200000]  # by key ctx (max)


@pytest.mark.slow
def test_the_command_refuses_bad_files_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("8192 9000\n1e5 3\n", encoding="utf-8")
    for args, message in (
        (["--trajectory", "file", "--seq-lens", str(bad)], f"{bad}:2: seq_len '1e5' is not a whole number"),
        (["--seq-lens", str(bad)], "--trajectory file and --seq-lens FILE go together"),
        (["--trajectory", "file"], "--trajectory file and --seq-lens FILE go together"),
    ):
        done = run("decode", "--q", "8", "-o", str(tmp_path / "out"), *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert message in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()  # refused before anything ran

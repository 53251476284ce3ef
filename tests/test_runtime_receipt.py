"""The decode receipt (JSON and markdown) renders what the summary decided, from hand-made timings."""

from __future__ import annotations

import json

import pytest

from traceattr.jobs.decode import DISPATCHER, DecodeConfig, DecodeResult, result_json, result_markdown, write_receipts
from traceattr.jobs.decode_summary import summarize

pytest.importorskip("scipy")

FA3 = [[10.0, 10.2, 9.8, 10.0], [20.0, 20.0, 20.0, 20.0], [40.0, 41.0, 39.0, 40.0]]
FMLA = [[12.0, 12.0, 12.0, 12.0], [25.0, 25.0, 25.0, 25.0], [30.0, 30.0, 30.0, 30.0]]


def _result() -> DecodeResult:
    times = {"fa3": FA3, "flashmla": FMLA, DISPATCHER: [FA3[0], FA3[1], FMLA[2]]}
    s = summarize(times, ("fa3", "flashmla"), DISPATCHER, ["fa3", "fa3", "flashmla"], [8192, 90_000, 900_000])
    fp = {"buffers_bytes": 1 << 20, "capture_bytes": 0, "reserved_bytes": 2 << 20, "driver_bytes": -5}
    host = {"layers": 1, "steps": 3, "choose_us": 1.5, "replan_us": {"fa3": 700.0, "flashmla": 9.0}, "launch_us": 4.0,
            "host_mean_us": 500.0, "gpu_mean_us": 80.0, "serial_wall_mean_us": 600.0, "pipelined_wall_mean_us": 520.0,
            "choose_loop_ns": 200.0}  # fmt: skip
    return DecodeResult(
        config=DecodeConfig(q=8, steps=3, iters=4), table_source="t.json (graphs; family q8_ctx*)", table_doc={},
        summary=s, graphs={"fa3": 1, "flashmla": 1, DISPATCHER: 2},
        memory={"fa3": {"fa3": fp}, "flashmla": {"flashmla": fp}, DISPATCHER: {"fa3": fp, "flashmla": fp}},
        others={}, steps=[(8192,), (90_000,), (900_000,)], host=[host], equal={"fa3": [True] * 3, "flashmla": [True] * 3, DISPATCHER: [True, True, False]},
        grid=None, times_us=times, wall_s=1.0,
    )  # fmt: skip


def test_other_rules_and_unchecked_batches_are_said() -> None:
    r = _result()
    mean = summarize(r.times_us, ("fa3", "flashmla"), DISPATCHER, ["fa3", "flashmla", "flashmla"], [1, 2, 3])
    r.others = {"dispatch-mean": _renamed(mean, "dispatch-mean")}
    r.equal = {k: [] for k in r.equal}
    md = result_markdown(r)
    assert "Rule `mean` (`dispatch-mean`, the same table): 0.060 ms, gain +10.45%" in md
    assert "No bitwise check in this run (--no-verify)." in md and "steps equal" not in md


def _renamed(s, label):  # the summary with its dispatcher under another label, as run_decode keys them
    import dataclasses

    totals = {**s.totals, label: s.totals[DISPATCHER]}
    return dataclasses.replace(s, dispatcher=label, totals=totals)


def test_the_receipt_leads_with_the_answer(tmp_path) -> None:
    r = _result()
    md = result_markdown(r)
    assert md.startswith("# Decode trajectory `grow`: q8 h16 b1, ctx 8,192 → 900,000, 3 steps (log-spaced")
    first = md.splitlines()[2]
    assert first.startswith("**Dispatcher 0.060 ms** per pass; best fixed arm **flashmla** 0.067 ms; **gain +10.45%")
    assert "regret vs the per-step oracle **+0.00%" in first and "1 switch(es)" in first
    assert "Gain over each fixed arm (1 − dispatcher / arm, 95%): fa3 +14.29%" in md
    assert "| dispatch | 60.0 [" in md and "| 2 | 4 |" in md  # graphs, MiB (driver's negative share ignored)
    assert "- dispatch: 2/3 steps equal" in md
    assert "| 1 | 1.50 | fa3 700, flashmla 9 | 4.0 | 500 | 80 | 600 | 520 | 200 |" in md
    assert "| 900,000 | 40.0 | 30.0 | 30.0 | flashmla | flashmla |" in md
    doc = result_json(r)
    assert doc["summary"]["switches"] == 1 and doc["bitwise_equal_to_eager"][DISPATCHER] == {"equal": 2, "steps": 3}
    jpath, mpath = write_receipts(r, tmp_path, "q8")
    assert json.loads(jpath.read_text(encoding="utf-8"))["schema"] == "traceattr.decode/1"
    assert mpath.read_text(encoding="utf-8") == md


def test_a_receipt_reads_back_and_renders_the_same(tmp_path) -> None:
    from traceattr.jobs.decode import result_from_json
    from traceattr.runtime.table import FamilyKey, FamilyTable, Segment, table_doc

    r = _result()
    fam = FamilyTable(
        "q8_ctx*", FamilyKey(8, 16, 1), (Segment(None, 100_000, "fa3"), Segment(100_000, None, "flashmla"))
    )
    r.table_doc = table_doc("t", "graphs", [fam])
    doc = json.loads(json.dumps(result_json(r)))
    back = result_from_json(doc)
    assert result_markdown(back) == result_markdown(r)
    doc["summary"]["totals_us"][DISPATCHER]["value"] += 1
    with pytest.raises(Exception, match="differs from the stored"):
        result_from_json(doc)


def test_a_mixed_q_receipt_labels_its_steps_and_reads_back() -> None:
    from traceattr.jobs.decode import result_from_json
    from traceattr.runtime.table import FamilyKey, FamilyTable, Segment, table_doc

    r = _result()
    r.config = DecodeConfig(q=8, steps=3, iters=4, trajectory="mixq", mix_q=(1, 8), table="t.json")
    r.steps = [(8, 8192), (1, 90_000), (8, 900_000)]
    fams = [FamilyTable("q1_ctx*", FamilyKey(1, 16, 1), (Segment(None, None, "fa3"),)),
            FamilyTable("q8_ctx*", FamilyKey(8, 16, 1), (Segment(None, 100_000, "fa3"), Segment(100_000, None, "flashmla")))]  # fmt: skip
    r.table_doc = table_doc("t", "graphs", fams)
    md = result_markdown(r)
    assert "(one request a step, q drawn from 1, 8 with equal weights" in md
    assert "| q1 90,000 | 20.0 | 25.0 | 20.0 | fa3 | fa3 |" in md
    assert result_markdown(result_from_json(json.loads(json.dumps(result_json(r))))) == md
    with pytest.raises(Exception, match="go together"):
        DecodeConfig(q=8, trajectory="mixq")

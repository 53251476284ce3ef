"""The dispatcher with fake arms (no GPU): selection rules, which buffers a step rewrites, host-time split;
the per-step metadata against the eager arm's own chunking; trajectories."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence

import pytest

from traceattr.backends.flashinfer_wrapper import FlashinferMLA
from traceattr.backends.layout import KvLayout, Requests
from traceattr.core.errors import TraceattrError
from traceattr.core.shapes import Shape
from traceattr.runtime.dispatcher import ByQuery, Dispatcher
from traceattr.runtime.metadata import SlotLayout, StepShapeError, block_table, fa_launches
from traceattr.runtime.select import key_ctx
from traceattr.runtime.table import FamilyKey, FamilyTable, Segment
from traceattr.runtime.trajectory import grow, mix, mixed_q

TABLE = FamilyTable(
    "q8_ctx*",
    FamilyKey(8, 16, 1),
    (Segment(None, 150_000, "fa3"), Segment(150_000, 180_000, "flashmla"), Segment(180_000, 385_048, "fa3"),
     Segment(385_048, None, "flashmla")),
)  # fmt: skip


class FakeArm:
    """Records what the dispatcher asks of it."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.updates: list[tuple[int, ...]] = []
        self.replays = 0

    def update(self, seq_lens: Sequence[int]) -> None:
        self.updates.append(tuple(seq_lens))

    def replay(self) -> str:
        self.replays += 1
        return f"out of {self.label}"


def _dispatcher(**kw: object) -> tuple[Dispatcher, dict[str, FakeArm]]:
    arms = {a: FakeArm(a) for a in ("fa3", "flashmla", "unused")}
    return Dispatcher(TABLE, arms, **kw), arms  # type: ignore[arg-type]


def test_rules() -> None:
    assert key_ctx([100, 300, 200]) == 300
    assert key_ctx([100, 300, 200], "mean") == 200
    assert key_ctx([100, 101], "mean") == 101  # ceiling
    assert key_ctx([7], "mean") == key_ctx([7]) == 7
    with pytest.raises(ValueError, match="empty batch"):
        key_ctx([])
    with pytest.raises(ValueError, match="rule must be one of max, mean, got 'sum'"):
        key_ctx([1], "sum")  # type: ignore[arg-type]


def test_choice_follows_the_segments_at_their_edges() -> None:
    d, _ = _dispatcher()
    picks = {c: d.choose([c]) for c in (1, 149_999, 150_000, 179_999, 180_000, 385_047, 385_048, 900_000)}
    assert picks == {1: "fa3", 149_999: "fa3", 150_000: "flashmla", 179_999: "flashmla", 180_000: "fa3",
                     385_047: "fa3", 385_048: "flashmla", 900_000: "flashmla"}  # fmt: skip
    assert d.choose([10_000, 400_000]) == "flashmla"  # max
    assert Dispatcher(TABLE, d.arms, rule="mean").choose([10_000, 400_000]) == "fa3"  # mean 205k


def test_a_step_updates_and_replays_only_the_chosen_arm() -> None:
    d, arms = _dispatcher()
    assert d.graphs == 2 and "unused" not in d.arms  # one graph per arm the table can pick
    assert d.step([160_000], layers=3) == "out of flashmla"
    assert arms["flashmla"].updates == [(160_000,)] and arms["flashmla"].replays == 3
    assert arms["fa3"].updates == [] and arms["fa3"].replays == 0
    d.step([200_000])
    d.step([201_000])
    d.step([500_000])
    assert arms["fa3"].updates == [(200_000,), (201_000,)]
    assert d.chosen == ["flashmla", "fa3", "fa3", "flashmla"] and d.switches == 2
    assert len(d.times.choose_ns) == len(d.times.replan_ns) == len(d.times.launch_ns) == 4


def test_a_serving_dispatcher_keeps_no_history() -> None:
    arms = {a: FakeArm(a) for a in ("fa3", "flashmla")}
    d = Dispatcher(TABLE, arms, record=False)  # type: ignore[arg-type]
    for ctx in (10_000, 160_000, 170_000, 200_000, 500_000):
        d.step([ctx])
    assert d.chosen == [] and d.times.choose_ns == [] and d.times.launch_ns == []
    assert d.switches == 3 and d.current == "flashmla"


def test_launch_before_prepare_and_missing_arms_are_refused() -> None:
    d, _ = _dispatcher()
    with pytest.raises(TraceattrError, match="before prepare"):
        d.launch()
    with pytest.raises(TraceattrError, match="picks flashmla, which the dispatcher was not given"):
        Dispatcher(TABLE, {"fa3": FakeArm("fa3")})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="rule must be one of"):
        Dispatcher(TABLE, d.arms, rule="sum")  # type: ignore[arg-type]


def test_selection_is_a_few_microseconds() -> None:
    d, _ = _dispatcher()
    n = 20_000
    t0 = time.perf_counter()
    for _ in range(n):
        d.choose([123_456])
    per_call_us = (time.perf_counter() - t0) / n * 1e6
    assert per_call_us < 10, per_call_us  # the bound; ~0.5 µs on a loaded 2-core CI box


@pytest.mark.parametrize(("q", "splits", "ctx"), [(1, 1, 8192), (8, 1, 131_000), (1, 4, 8192), (1, 4, 900_000),
                                                   (8, 4, 131_001), (4, 2, 300), (1, 8, 65_537)])  # fmt: skip
def test_step_metadata_is_the_eager_arms_own(q: int, splits: int, ctx: int) -> None:
    """The launches a step writes equal the eager arm's (backends.flashinfer_wrapper), chunk for chunk."""
    shape = Shape(q=q, ctx=ctx)
    layout = SlotLayout.for_max_ctx(1, q, 64, 900_000)
    got = fa_launches(layout, [ctx], splits)
    want = FlashinferMLA(caps=None, wrapper_backend="fa3", splits=splits).launches(KvLayout(shape).requests())  # type: ignore[arg-type]
    assert len(got) == len(want)
    for g, (req, causal) in zip(got, want, strict=True):
        assert g.causal == causal
        assert list(g.qo_indptr) == req.qo_indptr and list(g.kv_indptr) == req.kv_indptr
        assert g.kv_lens == req.kv_lens and g.kv_indices == req.kv_indices
    # the captured shape: the same request count at every ctx
    assert [x.requests for x in fa_launches(layout, [900_000], splits)] == [x.requests for x in got]


def test_batch_slots_and_their_limits() -> None:
    layout = SlotLayout.for_max_ctx(3, 1, 64, 1000)  # 16 pages a slot
    (launch,) = fa_launches(layout, [1000, 64, 65])
    assert launch.page_ranges == ((0, 16), (16, 17), (32, 34))
    assert launch.kv_indptr == (0, 16, 17, 19) and launch.qo_indptr == (0, 1, 2, 3)
    assert block_table(layout)[2] == list(range(32, 48))
    chunked = fa_launches(layout, [1000, 256, 512], 4)[0]
    assert chunked.requests == 12
    ref = Requests((1, 1, 1), (1000, 256, 512), ((*range(0, 16),), (*range(16, 20),), (*range(32, 40),)), 64)
    assert chunked.kv_indices == Requests.concat(ref.chunks(4)).kv_indices
    with pytest.raises(StepShapeError, match="captured for batch 3, got 2"):
        fa_launches(layout, [10, 10])
    with pytest.raises(StepShapeError, match=r"seq_lens\[1\] = 1025: must lie in \[q=1, 1024\]"):
        fa_launches(layout, [10, 1025, 10])
    with pytest.raises(StepShapeError, match="splits=4 needs at least 4 KV pages"):
        fa_launches(layout, [1000, 100, 1000], 4)


def test_grow() -> None:
    steps = grow(8192, 900_000, 40)
    assert len(steps) == 40 and steps[0] == (8192,) and steps[-1] == (900_000,)
    ratios = [b[0] / a[0] for a, b in itertools.pairwise(steps)]
    assert max(ratios) / min(ratios) < 1.001  # log-spaced
    assert grow(10, 20, 3, batch=2) == ((10, 10), (14, 14), (20, 20))
    assert len(grow(1, 3, 10)) == 3  # repeated ctx dropped
    with pytest.raises(ValueError, match="start < stop"):
        grow(5, 5, 3)


def test_mix_is_ragged_seeded_and_in_range() -> None:
    steps = mix(8192, 900_000, 50, batch=4, seed=1)
    assert steps == mix(8192, 900_000, 50, batch=4, seed=1) != mix(8192, 900_000, 50, batch=4, seed=2)
    assert all(len(s) == 4 and all(8192 <= c <= 900_000 for c in s) for s in steps)
    d, _ = _dispatcher()
    by_mean = Dispatcher(TABLE, d.arms, rule="mean")
    assert any(d.choose(s) != by_mean.choose(s) for s in steps)  # where the rules disagree, a measurement decides
    with pytest.raises(ValueError, match="low < high"):
        mix(10, 10, 3, batch=1)


def test_by_query_routes_each_step_to_its_q() -> None:
    q1 = FamilyTable("q1_ctx*", FamilyKey(1, 16, 1), (Segment(None, None, "fa3"),))
    arms1 = {"fa3": FakeArm("fa3 q1")}
    d8, arms8 = _dispatcher()
    both = ByQuery({1: Dispatcher(q1, arms1), 8: d8})  # type: ignore[arg-type]
    assert both.graphs == 3
    assert both.choose((8, 500_000)) == "flashmla" and both.choose((1, 500_000)) == "fa3"
    for step in ((8, 160_000), (1, 160_000), (8, 500_000)):
        both.prepare(step)
        both.launch(layers=2)
    assert both.chosen == ["flashmla", "fa3", "flashmla"] and both.current == "flashmla"
    assert arms1["fa3"].updates == [(160_000,)] and arms8["flashmla"].updates == [(160_000,), (500_000,)]
    assert arms8["flashmla"].replays == 4 and len(both.times.launch_ns) == 3
    assert both.arms is d8.arms
    with pytest.raises(TraceattrError, match=r"q=4: this dispatcher serves q in \[1, 8\]"):
        both.prepare((4, 10_000))


def test_mixed_q_steps() -> None:
    steps = mixed_q((1, 4, 8), 8192, 900_000, 60, seed=3)
    assert steps == mixed_q((1, 4, 8), 8192, 900_000, 60, seed=3)
    assert {s[0] for s in steps} == {1, 4, 8} and all(8192 <= s[1] <= 900_000 and len(s) == 2 for s in steps)

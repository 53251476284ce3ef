"""What each step writes into an arm's static buffers, computed from seq_lens as plain data (no torch).

The static cache gives request slot *i* of a batch the pages ``[i·P, (i+1)·P)``, P = the pages of the
longest context the dispatcher serves: a fixed block table, so a step changes only lengths (a serving
engine's allocator would also change page ids; the buffers below take any ids, the tests use these).

A CUDA graph replays the kernels it captured with the same pointers and the same launch shapes: the
number of requests per launch is fixed at capture (flashinfer: "the captured batch shape cannot
change"), the values in the buffers are not. So every step's metadata here has the same request
count for a given (arm, batch): ``fa3`` one launch of *batch* requests; ``fa3[splits=N]`` N·batch
chunk requests (q = 1: one non-causal launch; q > 1: N-1 non-causal chunks and one causal launch, as
:meth:`traceattr.backends.flashinfer_wrapper.FlashinferMLA.launches` does eagerly).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from traceattr.backends.layout import pages_for


class StepShapeError(ValueError):
    """seq_lens a captured arm cannot take: wrong batch size, a ctx over capacity or too short to split."""


@dataclass(frozen=True)
class Launch:
    """One attention launch's CSR metadata; ``page_ranges`` lists each request's pages as [start, stop)."""

    qo_indptr: tuple[int, ...]
    kv_indptr: tuple[int, ...]
    kv_lens: tuple[int, ...]
    page_ranges: tuple[tuple[int, int], ...]
    causal: bool

    @property
    def requests(self) -> int:
        return len(self.kv_lens)

    @property
    def kv_indices(self) -> list[int]:
        """The page ids, request after request (what flashinfer's ``kv_indices`` holds)."""
        return [p for lo, hi in self.page_ranges for p in range(lo, hi)]


@dataclass(frozen=True)
class SlotLayout:
    """The static cache: *batch* request slots of *pages_per_slot* pages of *page* tokens, q tokens each."""

    batch: int
    q: int
    page: int
    pages_per_slot: int

    @classmethod
    def for_max_ctx(cls, batch: int, q: int, page: int, max_ctx: int) -> SlotLayout:
        return cls(batch, q, page, pages_for(max_ctx, page))

    @property
    def max_ctx(self) -> int:
        return self.pages_per_slot * self.page

    @property
    def num_pages(self) -> int:
        return self.batch * self.pages_per_slot

    def check(self, seq_lens: Sequence[int]) -> None:
        if len(seq_lens) != self.batch:
            raise StepShapeError(f"captured for batch {self.batch}, got {len(seq_lens)} seq_lens")
        for i, n in enumerate(seq_lens):
            if not self.q <= n <= self.max_ctx:
                raise StepShapeError(f"seq_lens[{i}] = {n}: must lie in [q={self.q}, {self.max_ctx}] (the capacity)")

    def slot_pages(self, i: int, tokens: int) -> tuple[int, int]:
        first = i * self.pages_per_slot
        return first, first + pages_for(tokens, self.page)


def fa_launches(layout: SlotLayout, seq_lens: Sequence[int], splits: int = 1) -> tuple[Launch, ...]:
    """The launches of ``fa3`` (``splits=1``) or ``fa3[splits=N]`` for one step, chunk-major like the eager arm."""
    layout.check(seq_lens)
    q, causal = layout.q, layout.q > 1
    if splits == 1:
        ranges = tuple(layout.slot_pages(i, n) for i, n in enumerate(seq_lens))
        return (_launch([q] * layout.batch, list(seq_lens), ranges, causal),)
    chunks: list[list[tuple[int, tuple[int, int]]]] = [[] for _ in range(splits)]  # chunk j: (tokens, pages)
    for i, n in enumerate(seq_lens):
        lo_page, hi_page = layout.slot_pages(i, n)
        p = hi_page - lo_page
        if p < splits:
            raise StepShapeError(
                f"splits={splits} needs at least {splits} KV pages per request; seq_lens[{i}] = {n} has {p}"
            )
        for j in range(splits):
            lo, hi = j * p // splits, (j + 1) * p // splits
            tokens = (hi - lo) * layout.page if j < splits - 1 else n - lo * layout.page
            if j == splits - 1 and tokens < q:
                raise StepShapeError(
                    f"splits={splits}: seq_lens[{i}] = {n} leaves {tokens} tokens in the last chunk, under q={q}"
                )
            chunks[j].append((tokens, (lo_page + lo, lo_page + hi)))
    groups = [chunks] if not causal else [chunks[:-1], chunks[-1:]]
    out = []
    for group, is_causal in zip(groups, (False, True), strict=False):
        flat = [c for chunk in group for c in chunk]
        out.append(_launch([q] * len(flat), [t for t, _ in flat], tuple(r for _, r in flat), is_causal))
    return tuple(out)


def _launch(q_lens: list[int], kv_lens: list[int], ranges: tuple[tuple[int, int], ...], causal: bool) -> Launch:
    return Launch(_prefix(q_lens), _prefix([hi - lo for lo, hi in ranges]), tuple(kv_lens), ranges, causal)


def _prefix(values: Sequence[int]) -> tuple[int, ...]:
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return tuple(out)


def block_table(layout: SlotLayout) -> list[list[int]]:
    """FlashMLA's static ``[batch, pages_per_slot]`` table: slot i's pages in order (only lengths change per step)."""
    return [list(range(i * layout.pages_per_slot, (i + 1) * layout.pages_per_slot)) for i in range(layout.batch)]

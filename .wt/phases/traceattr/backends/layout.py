"""The paged KV layout of a shape, as plain data (no torch): who owns which pages.

Every request of the shape owns ``ceil(ctx / page)`` physical pages of one
shared cache. Pages are handed out in order, or shuffled (``shuffle=True``)
so consecutive logical pages are not neighbours in memory, as in a serving
cache after churn. Backends that split the verify tokens into one-token
requests (the "row" layout) reuse the same pages: row j of request b sees the
first ``ctx - q + 1 + j`` tokens of request b's pages.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property

from traceattr.core.shapes import Shape


@dataclass(frozen=True)
class Requests:
    """A batch as the kernels see it: query tokens, KV length and page list per request."""

    q_lens: tuple[int, ...]
    kv_lens: tuple[int, ...]
    pages: tuple[tuple[int, ...], ...]  # physical page ids per request, in logical order
    page_size: int

    @property
    def batch(self) -> int:
        return len(self.q_lens)

    @property
    def total_q(self) -> int:
        return sum(self.q_lens)

    @cached_property
    def qo_indptr(self) -> list[int]:
        return _prefix(self.q_lens)

    @cached_property
    def kv_indptr(self) -> list[int]:
        return _prefix([len(p) for p in self.pages])

    @cached_property
    def kv_indices(self) -> list[int]:
        return [i for pages in self.pages for i in pages]

    @property
    def max_pages(self) -> int:
        return max(len(p) for p in self.pages)

    def block_table(self, width: int | None = None) -> list[list[int]]:
        """``[batch, width]`` page table, padded with page 0 (never read past kv_len)."""
        w = width or self.max_pages
        return [list(p) + [0] * (w - len(p)) for p in self.pages]

    def chunks(self, n: int) -> list[Requests]:
        """The KV of every request cut into *n* page-aligned chunks: chunk j as its own batch.

        Chunk j of a request holds its pages ``[j·P/n, (j+1)·P/n)`` and keeps all its
        query rows; only the last chunk holds the newest tokens (where a causal mask
        bites). Raises :class:`BackendUnsupported` when a request has fewer than *n*
        pages or its last chunk fewer tokens than its query rows.
        """
        from traceattr.core.errors import BackendUnsupported

        out = []
        for j in range(n):
            kv_lens, pages = [], []
            for q, length, owned in zip(self.q_lens, self.kv_lens, self.pages, strict=True):
                p = len(owned)
                if p < n:
                    raise BackendUnsupported(f"splits={n} needs at least {n} KV pages per request, one has {p}")
                lo, hi = j * p // n, (j + 1) * p // n
                tokens = (hi - lo) * self.page_size if j < n - 1 else length - lo * self.page_size
                if j == n - 1 and tokens < q:
                    raise BackendUnsupported(f"splits={n}: the last chunk ({tokens} tokens) is shorter than q={q}")
                kv_lens.append(tokens)
                pages.append(owned[lo:hi])
            out.append(Requests(self.q_lens, tuple(kv_lens), tuple(pages), self.page_size))
        return out

    @staticmethod
    def concat(parts: list[Requests]) -> Requests:
        """One batch of all requests of *parts*, in order."""
        return Requests(
            tuple(q for r in parts for q in r.q_lens),
            tuple(k for r in parts for k in r.kv_lens),
            tuple(p for r in parts for p in r.pages),
            parts[0].page_size,
        )

    @property
    def uniform_q(self) -> int | None:
        """The common q of every request, or None when it varies."""
        return self.q_lens[0] if len(set(self.q_lens)) == 1 else None


def _prefix(values: tuple[int, ...] | list[int]) -> list[int]:
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out


def pages_for(tokens: int, page: int) -> int:
    return -(-tokens // page)


@dataclass(frozen=True)
class KvLayout:
    """Physical pages of one shape's cache and the requests over them."""

    shape: Shape
    shuffle: bool = False
    seed: int = 0

    @property
    def pages_per_request(self) -> int:
        return pages_for(self.shape.ctx, self.shape.page)

    @property
    def num_pages(self) -> int:
        return self.shape.batch * self.pages_per_request

    @cached_property
    def owned(self) -> tuple[tuple[int, ...], ...]:
        """Physical page ids of each original request (ctx tokens each)."""
        ids = list(range(self.num_pages))
        if self.shuffle:
            random.Random(self.seed).shuffle(ids)
        n = self.pages_per_request
        return tuple(tuple(ids[b * n : (b + 1) * n]) for b in range(self.shape.batch))

    def requests(self) -> Requests:
        """The shape's own batch: its pattern decides the query tokens per request."""
        if self.shape.pattern == "row":
            return self.row_requests()
        q_lens = tuple(self.shape.q_lens())
        kv = tuple(self.shape.kv_lens())
        return Requests(q_lens, kv, self.owned, self.shape.page)

    def row_requests(self) -> Requests:
        """Each verify token as its own one-token request over its request's pages."""
        q, ctx, page = self.shape.q, self.shape.ctx, self.shape.page
        q_lens, kv_lens, pages = [], [], []
        base = self.shape.q_lens() if self.shape.pattern != "row" else [q] * self.shape.batch
        for b, qb in enumerate(base):
            for j in range(qb):
                length = ctx - qb + 1 + j
                q_lens.append(1)
                kv_lens.append(length)
                pages.append(self.owned[b][: pages_for(length, page)])
        return Requests(tuple(q_lens), tuple(kv_lens), tuple(pages), page)

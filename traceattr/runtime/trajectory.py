"""Decode trajectories as plain data: the seq_lens of each step (no torch).

``grow``: requests whose ctx grows from A to B as a long generation does, sampled at log-spaced steps
(a real generation visits every ctx; timing every 1k-th step of 900k would take hours, and the
kernels' time is smooth between the sampled points except where the table says it is not).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Step = tuple[int, ...]


def grow(start: int, stop: int, steps: int, *, batch: int = 1) -> tuple[Step, ...]:
    """*steps* log-spaced ctx from *start* to *stop* inclusive, every request of the batch at that ctx."""
    if not 1 <= start < stop:
        raise ValueError(f"grow needs 1 ≤ start < stop, got {start} → {stop}")
    if steps < 2:
        raise ValueError(f"grow needs at least 2 steps, got {steps}")
    ratio = math.log(stop / start) / (steps - 1)
    ctx = [round(start * math.exp(ratio * i)) for i in range(steps)]
    ctx[-1] = stop
    out: list[Step] = []
    for c in ctx:
        if not out or c > out[-1][0]:
            out.append((c,) * batch)
    return tuple(out)


def key_ctx_of(steps: Sequence[Step]) -> list[int]:
    """The longest request per step (what a uniform trajectory's steps are labelled with)."""
    return [max(s) for s in steps]

"""Decode trajectories as plain data: the seq_lens of each step (no torch).

``grow``: requests whose ctx grows from A to B as a long generation does, sampled at log-spaced steps
(a real generation visits every ctx; timing every 1k-th step of 900k would take hours, and the
kernels' time is smooth between the sampled points except where the table says it is not).
"""

from __future__ import annotations

import math
import random
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


def mix(low: int, high: int, steps: int, *, batch: int, seed: int = 0) -> tuple[Step, ...]:
    """*steps* batches of *batch* requests, each request's ctx drawn log-uniform in [low, high] (seeded):
    ragged batches, where the rules (``max``, ``mean``) that key a batch on one ctx disagree."""
    if not 1 <= low < high:
        raise ValueError(f"mix needs 1 ≤ low < high, got {low}, {high}")
    rng = random.Random(seed)
    span = math.log(high / low)
    return tuple(tuple(round(low * math.exp(rng.random() * span)) for _ in range(batch)) for _ in range(steps))


def mixed_q(qs: Sequence[int], low: int, high: int, steps: int, *, seed: int = 0) -> tuple[Step, ...]:
    """*steps* one-request steps ``(q, ctx)``: q drawn from *qs* with equal weights, ctx log-uniform in
    [low, high] (seeded): a server whose decode steps alternate plain decode and MTP verify widths."""
    if not qs or not 1 <= low < high:
        raise ValueError(f"mixed_q needs q values and 1 ≤ low < high, got {list(qs)}, {low}, {high}")
    rng = random.Random(seed)
    span = math.log(high / low)
    return tuple((rng.choice(list(qs)), round(low * math.exp(rng.random() * span))) for _ in range(steps))


def key_ctx_of(steps: Sequence[Step]) -> list[int]:
    """The longest request per step (what a uniform trajectory's steps are labelled with)."""
    return [max(s) for s in steps]

"""What the runner process is asked to do: written by ``profile``, read by the runner.

Plain data (JSON), so the process nsys launches needs nothing but this file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from traceattr import runfolder


@dataclass(frozen=True)
class RunPlan:
    shapes: tuple[str, ...]  # canonical shape names
    arms: tuple[str, ...]  # arm texts (traceattr.arms grammar, labels distinct), in A B … order
    iters: int = 20  # rounds: every arm runs once per round
    warmup: int = 3  # untimed calls per arm after validation (the first also JIT-compiles)
    flush_bytes: int = 256 << 20  # L2 flush before each call; ≥ 2× L2 (H200: 60 MB, B200: 126 MB)
    between: str = "flush"  # before every timed call: "flush", "flush+ARM" (flush, then ARM's call) or "none"
    order: str = "abba"  # "abba": arms interleaved, reversed on odd rounds; "blocked": each arm's calls back to back
    graphs: bool = False  # replay every arm's call as a captured CUDA graph (an arm's [graphs] does it for one)
    shuffle: bool = False  # scatter each request's KV pages over the cache
    seed: int = 0
    validate: bool = True  # compare with the torch reference before timing; refuse wrong kernels
    tolerance: dict[str, float] = field(default_factory=lambda: {"bf16": 0.02, "fp8": 0.08})
    results: str = runfolder.RUNNER  # written into the run folder
    capture_range: bool = True  # start/stop nsys capture around the timed loop (cudaProfilerApi)

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> RunPlan:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["shapes"] = tuple(data["shapes"])
        data["arms"] = tuple(data["arms"])
        return cls(**data)


BETWEEN = ("flush", "none")  # or "flush+ARM"
ORDERS = ("abba", "blocked")


def between_arm(between: str) -> str | None:
    """The ARM of ``flush+ARM``, None for ``flush`` and ``none``; ValueError for anything else."""
    if between in BETWEEN:
        return None
    head, plus, arm = between.partition("+")
    if head != "flush" or not plus or not arm:
        raise ValueError(f"--between must be flush, none or flush+ARM (e.g. flush+fa3), got {between!r}")
    return arm


def arm_letters(backends: tuple[str, ...]) -> dict[str, str]:
    """A, B, C, … per arm label, in the order given."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return {b: letters[i] if i < len(letters) else f"A{i}" for i, b in enumerate(backends)}


def round_order(backends: tuple[str, ...], r: int) -> tuple[str, ...]:
    """ABBA: even rounds in order, odd rounds reversed, so drift and warm-up hit every arm alike."""
    return backends if r % 2 == 0 else tuple(reversed(backends))


def call_order(arms: tuple[str, ...], iters: int, order: str) -> list[list[tuple[str, int]]]:
    """The timed calls as groups of (arm, iteration); one group is in flight at a time.

    ``abba``: group r is round r (every arm once, reversed on odd rounds).
    ``blocked``: each arm's ``iters`` calls back to back, arms in the order given,
    cut into groups of ``len(arms)`` calls so as many calls are in flight as with abba.
    """
    if order == "abba":
        return [[(a, r) for a in round_order(arms, r)] for r in range(iters)]
    if order != "blocked":
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    flat = [(a, r) for a in arms for r in range(iters)]
    width = max(1, len(arms))
    return [flat[i : i + width] for i in range(0, len(flat), width)]

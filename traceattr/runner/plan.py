"""What the runner process is asked to do: written by ``profile``, read by the runner.

Plain data (JSON), so the process nsys launches needs nothing but this file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from traceattr.core import runfolder
from traceattr.core.errors import TraceattrError


@dataclass(frozen=True)
class RunPlan:
    shapes: tuple[str, ...]  # canonical shape names
    arms: tuple[str, ...]  # arm texts (traceattr.backends.arms grammar, labels distinct), in A B … order
    iters: int = 20  # rounds: every arm runs once per round (the minimum when max_noise is set)
    max_noise: float | None = None  # add rounds until every arm's median is this precise (fraction)
    max_iters: int | None = None  # ... but never more rounds than this
    warmup: int = 3  # untimed calls per arm after validation (the first also JIT-compiles)
    flush_bytes: int = 256 << 20  # L2 flush before each call; ≥ 2× L2 (H200: 60 MB, B200: 126 MB)
    flush_kind: str = "fill+evict"  # runner.flush: a fill alone leaves a call's lines and pages warm
    between: str = "flush"  # before every timed call: "flush", "flush+ARM" (flush, then ARM's call) or "none"
    order: str = "abba"  # "abba": arms interleaved, reversed on odd rounds; "blocked": each arm's calls back to back
    # > 0: before each group the GPU spins until the host has enqueued the group and releases it (runner.hold),
    # so no call waits for its own launch; the number no longer sets a length (kept so plans and --hold-us read)
    hold_us: float = 0.0
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


DEFAULT_MAX_ITERS = 500  # with max_noise and no max_iters: ~500 × (flush + call) per arm stays under a second at 900k
NOISE_STEP = 10  # rounds added at a time while the noise is above max_noise (even: both ABBA orders alike)


def call_order(arms: tuple[str, ...], iters: int, order: str, start: int = 0) -> list[list[tuple[str, int]]]:
    """The timed calls as groups of (arm, iteration); one group is in flight at a time.

    ``abba``: group r is round r (every arm once, reversed on odd rounds), for
    rounds ``start`` … ``start + iters - 1`` (more rounds continue the alternation).
    ``blocked``: each arm's ``iters`` calls back to back, arms in the order given (more
    rounds: another block per arm), cut into groups of ``len(arms)`` calls so as many calls are in flight as with abba.
    """
    if order == "abba":
        return [[(a, r) for a in round_order(arms, r)] for r in range(start, start + iters)]
    if order != "blocked":
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    flat = [(a, r) for a in arms for r in range(start, start + iters)]
    width = max(1, len(arms))
    return [flat[i : i + width] for i in range(0, len(flat), width)]


def check_timing(iters: int, max_noise: float | None, max_iters: int | None, hold_us: float = 0.0) -> None:
    """--max-noise a fraction in (0, 1), --max-iters at least --iters, --hold-us in [0, 10 ms]; one line otherwise."""
    if not 0 <= hold_us <= 10_000:
        raise TraceattrError(f"--hold-us must lie in [0, 10000] µs per call, got {hold_us:g}")
    if max_noise is not None and not 0 < max_noise < 1:
        raise TraceattrError(
            f"--max-noise is a fraction of the median in (0, 1), e.g. 0.005 for ±0.5%, got {max_noise}"
        )
    if max_iters is not None and max_iters < iters:
        raise TraceattrError(f"--max-iters ({max_iters}) must be at least --iters ({iters})")


def more_rounds(done: int, noise: dict[str, float], plan: RunPlan) -> int:
    """How many more ABBA rounds a shape needs after *done*, given each arm's median noise so far (0: stop).

    The rule looks only at each arm's own spread, never at how the arms
    compare, so stopping on it cannot steer a verdict.
    """
    if plan.max_noise is None:
        return 0
    cap = plan.max_iters if plan.max_iters is not None else max(plan.iters, DEFAULT_MAX_ITERS)
    if done >= cap or all(v <= plan.max_noise for v in noise.values()):
        return 0
    return min(NOISE_STEP, cap - done)

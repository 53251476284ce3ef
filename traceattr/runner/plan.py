"""How the runner schedules its calls: the order of arms, what runs between calls, when to stop adding iterations.

The plan itself (:class:`RunPlan`, plan.json) is a run-folder record of
:mod:`traceattr.core.records`; it is imported here so the runner and the jobs
find it beside the rules that read it.
"""

from __future__ import annotations

import os

from traceattr.backends.arms import parse_arm
from traceattr.core.errors import TraceattrError
from traceattr.core.protocol import DEFAULT_MAX_ITERS, MAX_HOLD_US, ORDERS
from traceattr.core.records import RunPlan

__all__ = [
    "RunPlan",
    "arm_letters",
    "between_arm",
    "call_order",
    "check_between",
    "check_timing",
    "event_directional",
    "iteration_order",
    "more_iterations",
]  # fmt: skip


BETWEEN = ("flush", "none")  # or "flush+ARM"


def between_arm(between: str) -> str | None:
    """The ARM of ``flush+ARM``, None for ``flush`` and ``none``; ValueError for anything else."""
    if between in BETWEEN:
        return None
    head, plus, arm = between.partition("+")
    if head != "flush" or not plus or not arm:
        raise ValueError(f"--between must be flush, none or flush+ARM (e.g. flush+fa3), got {between!r}")
    return arm


def check_between(between: str) -> str:
    """*between* as the runner reads it: ``flush``, ``none`` or ``flush+ARM`` with ARM's canonical text.

    The one check of ``--between`` (profile and round): an unknown predecessor fails here, before any
    capture; a one-line TraceattrError otherwise.
    """
    try:
        predecessor = between_arm(between)
    except ValueError as err:
        raise TraceattrError(str(err)) from None
    return between if predecessor is None else f"flush+{parse_arm(predecessor).text}"


def arm_letters(backends: tuple[str, ...]) -> dict[str, str]:
    """A, B, C, … per arm label, in the order given."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return {b: letters[i] if i < len(letters) else f"A{i}" for i, b in enumerate(backends)}


def iteration_order(backends: tuple[str, ...], r: int) -> tuple[str, ...]:
    """ABBA: even iterations in order, odd ones reversed, so drift and warm-up hit every arm alike."""
    return backends if r % 2 == 0 else tuple(reversed(backends))


NOISE_STEP = 10  # iterations added at a time while the noise is above max_noise (even: both ABBA orders alike)


def call_order(arms: tuple[str, ...], iters: int, order: str, start: int = 0) -> list[list[tuple[str, int]]]:
    """The timed calls as groups of (arm, iteration); one group is in flight at a time.

    ``abba``: group r is iteration r (every arm once, reversed on odd ones), for
    iterations ``start`` … ``start + iters - 1`` (more continue the alternation).
    ``blocked``: each arm's ``iters`` calls back to back, arms in the order given (more
    iterations: another block per arm), cut into groups of ``len(arms)`` calls so as many calls are in flight as with abba.
    """
    if order == "abba":
        return [[(a, r) for a in iteration_order(arms, r)] for r in range(start, start + iters)]
    if order != "blocked":
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    flat = [(a, r) for a in arms for r in range(start, start + iters)]
    width = max(1, len(arms))
    return [flat[i : i + width] for i in range(0, len(flat), width)]


def check_hold_possible() -> None:
    """The host-released hold (runner.hold) cannot run under blocking launches: one line, before any capture."""
    if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1":
        # every launch then returns only when its kernel ends, so the hold's spin would wait out its timeout
        raise TraceattrError(
            "CUDA_LAUNCH_BLOCKING=1 and the host-released hold exclude each other: unset it, or pass --no-hold"
        )


def check_timing(iters: int, max_noise: float | None, max_iters: int | None, hold_us: float = 0.0) -> None:
    """--max-noise a fraction in (0, 1), --max-iters at least --iters, --hold-us in [0, 10 ms]; one line otherwise."""
    if not 0 <= hold_us <= MAX_HOLD_US:
        raise TraceattrError(f"--hold-us must lie in [0, {MAX_HOLD_US:g}] µs per call, got {hold_us:g}")
    if hold_us > 0:
        check_hold_possible()
    if max_noise is not None and not 0 < max_noise < 1:
        raise TraceattrError(
            f"--max-noise is a fraction of the median in (0, 1), e.g. 0.005 for ±0.5%, got {max_noise}"
        )
    if max_iters is not None and max_iters < iters:
        raise TraceattrError(f"--max-iters ({max_iters}) must be at least --iters ({iters})")


# a directional disagreement this large inside one capture is refused under the default limit (0.02) with a
# wide margin: more calls make the median more precise, not the row answerable (the round's own gate decides)
HOPELESS_DIRECTIONAL = 0.10


def more_iterations(
    done: int, noise: dict[str, float], plan: RunPlan, *, directional: float | None = None,
    host_waited: bool = False,
) -> int:  # fmt: skip
    """How many more ABBA iterations a shape needs after *done*, given each arm's median noise so far (0: stop).

    The noise rule looks only at each arm's own spread, never at how the arms
    compare, so stopping on it cannot steer a verdict. Two things stop the
    loop before the noise target, because more calls cannot help:

    * *host_waited*: the hold timed out, so the GPU waited for the host and the
      host sets the spread (``runner.hold``; the receipt names the cause);
    * *directional* (:func:`event_directional`, the capture's CUDA-event
      disagreement between the two arm orders) above :data:`HOPELESS_DIRECTIONAL`
      after the first ``plan.iters`` iterations: the row will be refused by the
      order, however precise its medians.

    The round decides what needs several captures (``analysis.rounds.certain_refusals``
    drops such rows from the captures still to come).
    """
    if plan.max_noise is None or host_waited:
        return 0
    if directional is not None and directional > HOPELESS_DIRECTIONAL and done >= plan.iters:
        return 0
    cap = plan.max_iters if plan.max_iters is not None else max(plan.iters, DEFAULT_MAX_ITERS)
    if done >= cap or all(v <= plan.max_noise for v in noise.values()):
        return 0
    return min(NOISE_STEP, cap - done)


def event_directional(times: dict[str, list[float]], arms: tuple[str, ...]) -> float | None:
    """|median ratio when the first arm ran first − when the second did|, from ABBA's per-iteration times.

    *times*: each arm's time per iteration in iteration order, *arms* in the capture's order (iteration r runs
    :func:`iteration_order`). None unless exactly two arms with an even and an odd iteration each.
    """
    if len(arms) != 2:
        return None
    a, b = (times.get(arm, []) for arm in arms)
    ratios = [(y / x, r % 2) for r, (x, y) in enumerate(zip(a, b, strict=False)) if x > 0]
    even = sorted(v for v, parity in ratios if parity == 0)
    odd = sorted(v for v, parity in ratios if parity == 1)
    if not even or not odd:
        return None
    return abs(_median(even) - _median(odd))


def _median(ordered: list[float]) -> float:
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2

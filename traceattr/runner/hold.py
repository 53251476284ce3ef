"""A hold that the host releases: nvbench's blocking kernel, in Triton.

Before each group of timed calls the runner launches one tiny kernel that
spins on a flag in pinned, host-mapped memory; the host enqueues the whole
group behind it and then sets the flag. So every call of the group is in the
stream's queue before the GPU reaches it, however slow the host (a Python arm
that launches a split kernel and a merge, an eager call with many small ops):
no call's span or CUDA-event time includes the GPU waiting for its launch.
A fixed-length spin cannot promise that; this one is as long as the host
needs and no longer.

The kernel reads the flag with volatile loads (every iteration goes to the
host's memory over the bus) and gives up after a timeout on the GPU's global
timer, so a call that synchronizes inside the group (it would wait for the
held stream forever) costs one timeout, which the hold reports, not a hang.
It also writes back how long it spun: how long the GPU waited for the host.

A kernel launched for the first time in the process loads its module (CUDA's
lazy loading), and that waits for the device to go idle, i.e. for the hold's
timeout: every kernel of a held group must have run once before (the runner
validates and warms each arm first, and runs one untimed held group per shape).

Why Triton: it ships with PyTorch on Linux (the device image has it), needs
no nvcc and no build step (a ~1 s JIT on first use, cached by Triton), and a
pinned CPU tensor's pointer is a valid device pointer under unified
addressing, so the kernel reads the host's flag directly. nvbench registers
its flag with ``cudaHostRegister(..., Mapped)``; torch's pinned allocator
(``cudaHostAlloc``) gives the same mapped memory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from traceattr.runner.plan import check_hold_possible

TIMED_OUT, SPIN_NS = 0, 1  # slots of the pinned int64 buffer the kernel writes its result to
DEFAULT_TIMEOUT_S = 1.0  # far above any group's enqueue time (ms); a synchronizing call costs this once


@triton.jit
def _now() -> tl.tensor:
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _hold_kernel(flag_ptr, out, token, timeout_ns):
    # spin until the host writes this hold's token: a stale read (the previous hold's token) cannot release it
    start = _now()
    now = start
    flag = tl.load(flag_ptr, volatile=True)
    while (flag != token) & (now - start < timeout_ns):
        flag = tl.load(flag_ptr, volatile=True)
        now = _now()
    tl.store(out + 0, (flag != token).to(tl.int64))
    tl.store(out + 1, now - start)


@dataclass(frozen=True)
class Released:
    """One hold, after its group ran: how long the GPU waited and how long the host took to enqueue."""

    gpu_wait_ns: int  # the kernel's spin, on the GPU's timer: the GPU waiting for the host
    enqueue_ns: int  # host: from the hold's launch returning to the release
    timed_out: bool  # the flag never came: the group ran after the timeout (a call synchronized?)


class HostHold:
    """``hold()`` blocks the current stream; ``release()`` lets it run; ``result()`` after a synchronize."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_ns = int(timeout_s * 1e9)
        check_hold_possible()  # for a caller that did not check_timing first (examples/split_mla/bench.py)
        # the flag in a pinned allocation of its own that the GPU only reads (its results go to another)
        self.flag = torch.zeros(64, dtype=torch.int64, pin_memory=True)
        self.out = torch.zeros(64, dtype=torch.int64, pin_memory=True)
        self.token = 0
        self._held_at: int | None = None
        self._enqueue_ns = 0
        for _ in range(3):  # compile (first use), then check that a hold holds and sees the release
            self.hold()
            behind = torch.cuda.Event()
            behind.record()
            time.sleep(0.002)
            held = not behind.query()
            self.release()
            torch.cuda.synchronize()
            if self.result().timed_out:
                raise RuntimeError("the hold kernel never saw the host's flag (pinned memory not mapped?)")
            if not held:
                raise RuntimeError("the hold kernel did not hold the stream (it read a stale flag)")

    def hold(self) -> None:
        """Enqueue the spin on the current stream; everything enqueued after it waits for :meth:`release`."""
        # a new token per hold, not a 0/1 flag: on the H200 a hold whose flag had just been reset to 0 was
        # seen to run through at once (the GPU read the previous hold's 1), which a token rules out
        self.token += 1
        self.out.zero_()
        _hold_kernel[(1,)](self.flag, self.out, self.token, self.timeout_ns, num_warps=1)
        self._held_at = time.perf_counter_ns()

    def release(self) -> None:
        if self._held_at is None:
            return
        self._enqueue_ns = time.perf_counter_ns() - self._held_at
        self.flag[0] = self.token  # a plain store to pinned memory: the kernel's next volatile load sees it
        self._held_at = None

    def result(self) -> Released:
        """The last hold's numbers; valid once the stream has passed it (after a synchronize)."""
        values = self.out[:2].tolist()
        return Released(int(values[SPIN_NS]), self._enqueue_ns, bool(values[TIMED_OUT]))


@dataclass
class HoldLog:
    """One shape's holds and the host's time per call, summarised for runner.json (``shapes[shape].hold``)."""

    waits_ns: list[int]
    enqueue_ns: list[int]  # per group
    calls_ns: dict[str, list[int]]  # per arm: host time to enqueue one call (flush, predecessor, the call, events)
    timeouts: int = 0

    @classmethod
    def empty(cls) -> HoldLog:
        return cls([], [], {})

    def add(self, released: Released) -> None:
        self.waits_ns.append(released.gpu_wait_ns)
        self.enqueue_ns.append(released.enqueue_ns)
        self.timeouts += released.timed_out

    def add_call(self, label: str, ns: int) -> None:
        self.calls_ns.setdefault(label, []).append(ns)

    def summary(self) -> dict[str, object]:
        """Medians and maxima in µs: the GPU's wait for the host per group, the host's enqueue time per call."""

        def stats(values: list[int]) -> dict[str, float | None]:
            if not values:
                return {"median": None, "max": None}
            ordered = sorted(values)
            return {"median": round(ordered[len(ordered) // 2] / 1e3, 3), "max": round(ordered[-1] / 1e3, 3)}

        return {
            "groups": len(self.waits_ns),
            "timeouts": self.timeouts,
            "gpu_wait_us": stats(self.waits_ns),
            "group_enqueue_us": stats(self.enqueue_ns),
            "call_enqueue_us": {label: stats(v) for label, v in self.calls_ns.items()},
        }

"""How a measured call is named in NVTX, written by the runner and read by analysis.

One range per call, domain ``traceattr``, message of ``key=value`` words::

    backend=fa3 shape=q8_ctx900k_h16_b1_bf16_p64 arm=A iter=12

nsys shows it as ``traceattr:backend=fa3 shape=… arm=A iter=12``. The
``backend`` word is the arm's label (:mod:`traceattr.arms`: ``fa3``,
``fa3[splits=4]``, ``cand``; never whitespace). The L2 flush before each call
runs in its own ``traceattr:flush`` range (outside the call's), the
``--between flush+ARM`` predecessor call in a ``traceattr:between`` range,
warm-up calls in ``traceattr:warmup …`` ranges. A real DCP rank's call
(``traceattr profile --ranks N``) holds ``dcp attention``, ``dcp all-gather``
and ``dcp merge`` ranges. Pure string code: both
the GPU runner and the CPU-only analysis import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DOMAIN = "traceattr"
FLUSH = "flush"
BETWEEN = "between"
WARMUP = "warmup"
# inside a call of a real DCP rank (traceattr.runner.ranks): its three phases
DCP_ATTENTION = "dcp attention"
DCP_GATHER = "dcp all-gather"
DCP_MERGE = "dcp merge"
_WORD = re.compile(r"(\w+)=(\S+)")
KEYS = ("backend", "shape", "arm", "iter")


@dataclass(frozen=True)
class CallName:
    backend: str
    shape: str
    arm: str
    iteration: int

    @property
    def message(self) -> str:
        return f"backend={self.backend} shape={self.shape} arm={self.arm} iter={self.iteration}"


def parse_message(message: str | None) -> CallName | None:
    """The call a range message names, or None for any other range."""
    if not message or not message.startswith("backend="):
        return None
    words = dict(_WORD.findall(message))
    if not all(k in words for k in KEYS) or not words["iter"].isdigit():
        return None
    return CallName(words["backend"], words["shape"], words["arm"], int(words["iter"]))

"""What runs before every timed call to make it cold: the L2 flush, and what a fill alone leaves behind.

``fill``: zero a buffer of ``flush_bytes`` (≥ 2× L2). Measured on an H200
(examples/rounds/README.md, "What FlashMLA's time depends on"): a fill does
not leave the next call cold. FlashMLA after itself ran 14–18% faster than
after fa3 with a 128 MiB fill between, and a 1 GiB fill left the same gap;
a read of the same 128 MiB closed most of it, and a fill followed by one read
every 64 KiB over 16 GiB (``fill+evict``) closed all of it (≤ 1.1% on every
row, eager and graphs). So the zeros a fill writes do not evict what a
call read (its lines and its address translations survive), and which arm
ran before decided the time.

``fill+evict`` (the default): the fill, then one byte gathered every
``EVICT_STRIDE`` over a separate ``evict_bytes`` buffer: reads that take L2
lines and touch far more pages than the GPU's TLBs hold, in one small kernel
(~262k gathered bytes for 16 GiB).
"""

from __future__ import annotations

import torch

from traceattr.core.records import FLUSH_KINDS

EVICT_STRIDE = 64 << 10  # one read per 64 KiB: every 2 MiB page many times over, every 64 KiB one too
EVICT_BYTES = 16 << 30  # at most; never more than an eighth of the free memory


class Flush:
    def __init__(self, flush_bytes: int, kind: str = "fill+evict") -> None:
        if kind not in FLUSH_KINDS:
            raise ValueError(f"flush kind must be one of {', '.join(FLUSH_KINDS)}, got {kind!r}")
        self.kind = kind
        self.fill = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
        self.evict_bytes = 0
        if kind == "fill+evict":
            free, _ = torch.cuda.mem_get_info()
            self.evict_bytes = min(EVICT_BYTES, free // 8) // EVICT_STRIDE * EVICT_STRIDE
            self.area = torch.empty(self.evict_bytes, dtype=torch.uint8, device="cuda")
            self.index = torch.arange(0, self.evict_bytes, EVICT_STRIDE, device="cuda")
            self.sink = torch.empty(self.index.numel(), dtype=torch.uint8, device="cuda")

    def run(self) -> None:
        self.fill.zero_()
        if self.evict_bytes:
            torch.index_select(self.area, 0, self.index, out=self.sink)

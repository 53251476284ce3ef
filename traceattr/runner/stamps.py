"""The runner's phase hook: copy an instrumented call's stamps after every timed call, time its floor probes.

A call opts in with ``stamp_buffer`` (a device int64 tensor ``[rows, width]`` its
kernels write ``%globaltimer`` stamps into) and a non-empty ``stamp_header`` (the
kernels, their boundary names and rows: the layout of docs/phases.md). After each
timed call, outside its NVTX range, the buffer is cloned (a device copy, in stream
order) and zeroed, so a CTA that never writes leaves a zero row the reader refuses.
At the end the copies go to ``stamps/NNN.npy`` (int64 ``[calls, rows, width]``) with
``stamps/index.json`` naming each file's arm, shape, iterations and header.

A call with ``floor_probes`` (name → launch) has each probe timed ``FLOOR_REPS``
times with CUDA events after its shape's timed loop, inside the capture
(each rep behind the flush, alone in a ``traceattr:floor … rep=N`` range); runner.json's
``shapes[shape].floor[arm][probe]`` holds their CUDA-event times in µs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import nvtx
import torch

from traceattr.core.callnames import DOMAIN
from traceattr.core.runfolder import STAMPS_DIR, STAMPS_INDEX

FLOOR = "floor"
FLOOR_REPS = 50


@dataclass
class StampLog:
    """Every timed call's stamps, by (arm, shape), kept on the GPU until the run ends."""

    copies: dict[tuple[str, str], list[tuple[int, torch.Tensor]]] = field(default_factory=dict)
    headers: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def after_call(self, arm: str, shape: str, iteration: int, call: Any) -> None:
        header = getattr(call, "stamp_header", None)
        if not header:
            return
        buffer = call.stamp_buffer
        self.headers[(arm, shape)] = header
        self.copies.setdefault((arm, shape), []).append((iteration, buffer.clone()))
        buffer.zero_()

    def write(self, folder: Path) -> list[dict[str, Any]]:
        """stamps/NNN.npy and stamps/index.json; the index entries (empty when no call was instrumented)."""
        if not self.copies:
            return []
        out = folder / STAMPS_DIR
        out.mkdir(parents=True, exist_ok=True)
        index = []
        for n, (key, calls) in enumerate(sorted(self.copies.items())):
            name = f"{n:03d}.npy"
            np.save(out / name, torch.stack([c for _, c in calls]).cpu().numpy())
            index.append({"file": name, "arm": key[0], "shape": key[1], "iters": [i for i, _ in calls],
                          **self.headers[key]})  # fmt: skip
        (out / STAMPS_INDEX).write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
        return index


def time_floor_probes(ready: dict[str, Any], shape: str, flush: Any = None) -> dict[str, dict[str, list[float]]]:
    """Each ready arm's floor probes, each rep behind *flush* and in its own range: {arm: {probe: [event µs]}}.

    The CUDA-event times include the host's launch (Python launches take tens of µs); the floors
    traceattr reports are nsys's spans of the kernels in each rep's range (traceattr.phases.floor).
    """
    found: dict[str, dict[str, list[float]]] = {}
    for arm, prepared in ready.items():
        probes = getattr(prepared.call, "floor_probes", None)
        if not probes:
            continue
        found[arm] = {}
        for probe, launch in probes.items():
            launch()  # compiles the probe before it is timed
            torch.cuda.synchronize()
            pairs = []
            for rep in range(FLOOR_REPS):
                if flush is not None:
                    flush.run()
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with nvtx.annotate(f"{FLOOR} arm={arm} probe={probe} shape={shape} rep={rep}", domain=DOMAIN):
                    start.record()
                    launch()
                    stop.record()
                pairs.append((start, stop))
            torch.cuda.synchronize()
            found[arm][probe] = [round(a.elapsed_time(b) * 1000.0, 3) for a, b in pairs]
    return found

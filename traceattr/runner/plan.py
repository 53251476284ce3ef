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
    backends: tuple[str, ...]  # the arms, interleaved A B … B A per round
    iters: int = 20  # rounds: every arm runs once per round
    warmup: int = 3  # untimed calls per arm after validation (the first also JIT-compiles)
    flush_bytes: int = 256 << 20  # L2 flush before each call; ≥ 2× L2 (H200: 60 MB, B200: 126 MB)
    graphs: bool = False  # replay each call as a captured CUDA graph
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
        data["backends"] = tuple(data["backends"])
        return cls(**data)


def arm_letters(backends: tuple[str, ...]) -> dict[str, str]:
    """A, B, C, … per backend, in the order given."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return {b: letters[i] if i < len(letters) else f"A{i}" for i, b in enumerate(backends)}


def round_order(backends: tuple[str, ...], r: int) -> tuple[str, ...]:
    """ABBA: even rounds in order, odd rounds reversed, so drift and warm-up hit every arm alike."""
    return backends if r % 2 == 0 else tuple(reversed(backends))

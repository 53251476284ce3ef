"""``traceattr profile --shape …_dcp<N> --ranks N``: real DCP ranks, one process per GPU, one report each.

Each rank (:mod:`traceattr.runner.ranks`) runs under its own ``nsys profile``
(one report per rank, as a TP/DCP job is profiled), on GPU ``LOCAL_RANK``,
joined over NCCL by torch.distributed on this host. Afterwards every report is
exported and attributed together (:mod:`traceattr.jobs.many`): per rank the
``dcp attention``, ``dcp all-gather`` and ``dcp merge`` ranges, side by side,
and across ranks the slowest one. On ``cute-dsl`` every rank's call is
flashinfer's own DCP path (cyclic shards: :mod:`traceattr.backends.dcp`), on
other backends each rank attends over one contiguous span. The plan (commands, environments) is built
anywhere; ``--dry-run`` prints it. NVLink multicast stays off in every rank
(NCCL_NVLS_ENABLE=0 and its PyTorch/NVSHMEM twins): on shared hosts it can
take the GPUs out of service.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceattr.backends import gpu_count
from traceattr.backends.arms import arm_backend, parse_arm
from traceattr.backends.dcp import CONTIGUOUS_SHARDS, FLASHINFER_DCP, DcpPath, dcp_path
from traceattr.core import runfolder
from traceattr.core.errors import NsysError, TraceattrError
from traceattr.core.protocol import PROFILE, Protocol
from traceattr.core.records import DEFAULT_TOLERANCE
from traceattr.core.shapes import Shape
from traceattr.jobs.capture import profile_command
from traceattr.trace.nsys import export_command, find_nsys, run

RANK_FLUSH_BYTES = 128 << 20  # each rank's L2 flush when the protocol leaves it to the GPU (no GPU here to ask)
RANK_STEM = "rank{}"  # rank<r>.nsys-rep / .sqlite / .json in the run folder
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass(frozen=True)
class RanksPlan:
    shape: Shape
    ranks: int
    arm: str
    folder: Path
    nsys: Path | None
    protocol: Protocol = PROFILE  # iters, warmup, seed and flush_bytes reach every rank; the rest is one process's
    validate: bool = True
    port: int = 29511
    tolerance: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCE))

    def runner_plan(self) -> dict[str, Any]:
        """What every rank reads (plan.json)."""
        p = self.protocol
        return {"shape": self.shape.name, "arm": self.arm, "iters": p.iters, "warmup": p.warmup, "seed": p.seed,
                "validate": self.validate, "flush_bytes": p.flush_bytes or RANK_FLUSH_BYTES,
                "tolerance": self.tolerance}  # fmt: skip

    def env(self, rank: int) -> dict[str, str]:
        """Rank *rank*'s additions to the environment: its place in the group, and no NVLink multicast."""
        return {"RANK": str(rank), "WORLD_SIZE": str(self.ranks), "LOCAL_RANK": str(rank),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(self.port), **NO_MULTICAST}  # fmt: skip

    def command(self, rank: int) -> list[str]:
        app = [sys.executable, "-m", "traceattr.runner.ranks", str(self.folder / runfolder.PLAN), str(self.folder)]
        return profile_command(self.nsys or Path("nsys"), self.folder / RANK_STEM.format(rank), app)

    def shards(self) -> list[int]:
        return self.shape.dcp_shards()

    def dcp_path(self) -> DcpPath:
        """flashinfer's own DCP on cute-dsl (cyclic shards), contiguous shards on every other backend."""
        return FLASHINFER_DCP if dcp_path(arm_backend(parse_arm(self.arm))) == FLASHINFER_DCP else CONTIGUOUS_SHARDS

    def describe(self) -> str:
        path = self.dcp_path()
        lines = [f"{self.shape.name}: {self.ranks} DCP ranks, one process and one report per GPU ({self.arm}, {path})"]
        for r, tokens in enumerate(self.shards()):
            env = " ".join(f"{k}={v}" for k, v in self.env(r).items())
            held = f"positions {r}, {r + self.ranks}, {r + 2 * self.ranks}, …" if path == FLASHINFER_DCP else "one span"
            lines.append(f"  rank {r}: {tokens:,} tokens × {self.shape.batch} ({held}), all {self.shape.heads} heads")
            lines.append(f"    {env} {shlex.join(self.command(r))}")
        lines.append(f"  then: traceattr attribute {self.folder}/rank*.sqlite (per rank and across ranks)")
        return "\n".join(lines)


def make_ranks_plan(
    shape: Shape, ranks: int, arm: str = "fa3", *, protocol: Protocol = PROFILE, validate: bool = True,
    out_root: Path = Path("reports"),
) -> RanksPlan:  # fmt: skip
    """The plan of a real DCP run; *shape* must say ``dcp<ranks>`` (each rank's share is ctx/ranks, all heads)."""
    if ranks < 2:
        raise TraceattrError(f"--ranks must be at least 2, got {ranks}")
    if shape.dcp != ranks:
        raise TraceattrError(
            f"--ranks {ranks} needs a shape with dcp{ranks} (the context split over {ranks} ranks), got {shape.name}"
        )
    parsed = parse_arm(arm)
    if parsed.label != parsed.backend or parsed.graphs:
        raise TraceattrError(f"--ranks runs one plain backend per rank (e.g. fa3), got {arm!r}")
    folder = out_root / f"{time.strftime('%Y%m%d-%H%M%S')}_{shape.name}_ranks{ranks}"
    return RanksPlan(shape, ranks, parsed.backend, folder, find_nsys(), protocol, validate)


def execute_ranks(plan: RanksPlan, *, timeout: float = 1800) -> list[Path]:
    """Run every rank under nsys at once, export each report; the exports, rank order."""
    gpus = gpu_count()
    if gpus < plan.ranks:  # each rank runs on its own GPU (CUDA_VISIBLE_DEVICES): fewer would fail inside NCCL
        raise TraceattrError(f"--ranks {plan.ranks} needs {plan.ranks} GPUs, one per rank; this machine has {gpus}")
    if plan.nsys is None:
        raise NsysError("no nsys found (set TRACEATTR_NSYS or put nsys on PATH)")
    plan.folder.mkdir(parents=True, exist_ok=False)
    (plan.folder / runfolder.PLAN).write_text(json.dumps(plan.runner_plan(), indent=2) + "\n", encoding="utf-8")
    procs = []
    for r in range(plan.ranks):
        log = (plan.folder / f"{RANK_STEM.format(r)}.log").open("w", encoding="utf-8")
        env = {**os.environ, **plan.env(r)}
        procs.append((subprocess.Popen(plan.command(r), stdout=log, stderr=subprocess.STDOUT, env=env), log))
    deadline = time.time() + timeout
    failed = []
    for r, (proc, log) in enumerate(procs):
        try:
            code = proc.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for p, _ in procs:
                p.kill()
            code = -9
        log.close()
        if code != 0:
            failed.append(f"rank {r} exit {code} (see {log.name})")
    if failed:
        raise NsysError("; ".join(failed))
    exports = []
    for r in range(plan.ranks):
        stem = plan.folder / RANK_STEM.format(r)
        run(export_command(plan.nsys, stem.with_suffix(".nsys-rep"), stem.with_suffix(".sqlite")),
            what=f"nsys export of rank {r}", timeout=3600)  # fmt: skip
        exports.append(stem.with_suffix(".sqlite"))
    return exports

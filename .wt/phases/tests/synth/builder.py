"""Build small synthetic nsys traces event by event (tests, demos).

    b = TraceBuilder()
    dom = b.domain("traceattr", tid=1)
    b.push_range(tid=1, start=100, end=900, message="call:0", domain=dom)
    b.launch(tid=1, start=120, end=130, kernel="fmhaSm100fKernel_…", gpu_start=200, gpu_end=700)
    b.write("t.sqlite")

Identifiers follow nsys: globalTid = <HW:8><VM:8><PID:24><TID:24> and
correlation ids count per process, so two processes can reuse them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from tests.synth.writer import write_export
from traceattr.trace import schema as S

_HW_VM = 1 << 48  # VM id 1, as real captures show


def global_tid(pid: int, tid: int) -> int:
    return _HW_VM | (pid << 24) | tid


def global_pid(pid: int) -> int:
    return _HW_VM | (pid << 24)


@dataclass
class TraceBuilder:
    pid: int = 4242
    strings: dict[str, int] = field(default_factory=dict)
    kernels: list[dict] = field(default_factory=list)
    memcpys: list[dict] = field(default_factory=list)
    memsets: list[dict] = field(default_factory=list)
    runtime: list[dict] = field(default_factory=list)
    nvtx: list[dict] = field(default_factory=list)
    _next_corr: dict[int, int] = field(default_factory=dict)
    _next_domain: int = 1
    graph_mode: str = "Node"

    def string(self, value: str) -> int:
        if value not in self.strings:
            self.strings[value] = len(self.strings) + 1
        return self.strings[value]

    def _corr(self, pid: int) -> int:
        self._next_corr[pid] = self._next_corr.get(pid, 0) + 1
        return self._next_corr[pid]

    # -- NVTX -----------------------------------------------------------------
    def domain(self, name: str, tid: int, *, pid: int | None = None, start: int = 0) -> int:
        dom = self._next_domain
        self._next_domain += 1
        self.nvtx.append(
            {"start": start, "eventType": S.NVTX_DOMAIN_CREATE, "text": name,
             "globalTid": global_tid(pid or self.pid, tid), "domainId": dom}
        )  # fmt: skip
        return dom

    def push_range(
        self, *, tid: int, start: int, end: int | None, message: str, domain: int = 0,
        registered: bool = True, pid: int | None = None, payload: int | None = None,
    ) -> None:  # fmt: skip
        row = {"start": start, "end": end, "eventType": S.NVTX_PUSHPOP,
               "globalTid": global_tid(pid or self.pid, tid), "domainId": domain, "int64Value": payload}  # fmt: skip
        row |= {"textId": self.string(message)} if registered else {"text": message}
        self.nvtx.append(row)

    def start_end_range(
        self, *, tid: int, start: int, end: int | None, message: str, domain: int = 0,
        end_tid: int | None = None, pid: int | None = None, range_id: int | None = None,
    ) -> None:  # fmt: skip
        p = pid or self.pid
        self.nvtx.append(
            {"start": start, "end": end, "eventType": S.NVTX_STARTEND, "text": message,
             "globalTid": global_tid(p, tid), "domainId": domain, "rangeId": range_id,
             "endGlobalTid": None if end_tid is None else global_tid(p, end_tid)}
        )  # fmt: skip

    def mark(self, *, tid: int, time: int, message: str, domain: int = 0, pid: int | None = None) -> None:
        self.nvtx.append({"start": time, "eventType": S.NVTX_MARK, "text": message,
                          "globalTid": global_tid(pid or self.pid, tid), "domainId": domain})  # fmt: skip

    # -- CUDA API + GPU ops -------------------------------------------------------
    def api_call(self, *, tid: int, start: int, end: int, name: str, pid: int | None = None,
                 correlation: int | None = None) -> int:  # fmt: skip
        p = pid or self.pid
        corr = self._corr(p) if correlation is None else correlation
        self.runtime.append(
            {"start": start, "end": end, "eventClass": 0, "globalTid": global_tid(p, tid),
             "correlationId": corr, "nameId": self.string(name), "returnValue": 0}
        )  # fmt: skip
        return corr

    def launch(
        self, *, tid: int, start: int, end: int, kernel: str, gpu_start: int, gpu_end: int,
        stream: int = 7, device: int = 0, grid: tuple[int, int, int] = (132, 1, 1),
        block: tuple[int, int, int] = (128, 1, 1), pid: int | None = None, short: str | None = None,
        api: str = "cudaLaunchKernel_v7000", correlation: int | None = None, graph_node: int | None = None,
    ) -> int:  # fmt: skip
        """A launch call and the kernel it starts; returns the correlation id."""
        p = pid or self.pid
        corr = correlation if correlation is not None else self.api_call(tid=tid, start=start, end=end, name=api, pid=p)
        self.kernel(corr=corr, kernel=kernel, gpu_start=gpu_start, gpu_end=gpu_end, stream=stream,
                    device=device, grid=grid, block=block, pid=p, short=short, graph_node=graph_node)  # fmt: skip
        return corr

    def kernel(
        self, *, corr: int | None, kernel: str, gpu_start: int, gpu_end: int, stream: int = 7, device: int = 0,
        grid: tuple[int, int, int] = (132, 1, 1), block: tuple[int, int, int] = (128, 1, 1),
        pid: int | None = None, short: str | None = None, graph_node: int | None = None,
    ) -> None:  # fmt: skip
        """A kernel row alone (``corr`` may name no API call: a sliced trace)."""
        self.kernels.append(
            {"start": gpu_start, "end": gpu_end, "deviceId": device, "contextId": 1, "streamId": stream,
             "correlationId": corr, "globalPid": global_pid(pid or self.pid),
             "demangledName": self.string(kernel), "shortName": self.string(short or kernel.split("<")[0]),
             "gridX": grid[0], "gridY": grid[1], "gridZ": grid[2],
             "blockX": block[0], "blockY": block[1], "blockZ": block[2],
             "registersPerThread": 128, "graphNodeId": graph_node}
        )  # fmt: skip

    def memcpy(self, *, tid: int, start: int, end: int, gpu_start: int, gpu_end: int, nbytes: int,
               copy_kind: int = 1, stream: int = 7, pid: int | None = None) -> int:  # fmt: skip
        p = pid or self.pid
        corr = self.api_call(tid=tid, start=start, end=end, name="cudaMemcpyAsync_v3020", pid=p)
        self.memcpys.append(
            {"start": gpu_start, "end": gpu_end, "deviceId": 0, "contextId": 1, "streamId": stream,
             "correlationId": corr, "globalPid": global_pid(p), "bytes": nbytes, "copyKind": copy_kind}
        )  # fmt: skip
        return corr

    def memset(self, *, tid: int, start: int, end: int, gpu_start: int, gpu_end: int, nbytes: int,
               stream: int = 7, pid: int | None = None) -> int:  # fmt: skip
        p = pid or self.pid
        corr = self.api_call(tid=tid, start=start, end=end, name="cudaMemsetAsync_v3020", pid=p)
        self.memsets.append(
            {"start": gpu_start, "end": gpu_end, "deviceId": 0, "contextId": 1, "streamId": stream,
             "correlationId": corr, "globalPid": global_pid(p), "bytes": nbytes, "value": 0}
        )  # fmt: skip
        return corr

    # -- output -----------------------------------------------------------------
    def tables(self, gpu_name: str = "NVIDIA B200", cc: tuple[int, int] = (10, 0)) -> dict[str, pl.DataFrame]:
        def frame(rows: list[dict]) -> pl.DataFrame:
            return pl.DataFrame(rows, infer_schema_length=None)

        tables: dict[str, pl.DataFrame] = {
            "StringIds": pl.DataFrame({"id": list(self.strings.values()), "value": list(self.strings)}),
            "META_DATA_EXPORT": pl.DataFrame(
                {"name": ["EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION"], "value": ["2025.3.2.0", "3.20.3"]}
            ),
            "META_DATA_CAPTURE": pl.DataFrame(
                {"name": ["PROCESS_0:CUDA_GRAPH_TRACE_OPTIONS:MODE"], "value": [self.graph_mode]}
            ),
            "TARGET_INFO_GPU": pl.DataFrame(
                {
                    "vmId": [_HW_VM],
                    "id": [0],
                    "name": [gpu_name],
                    "smCount": [148],
                    "l2CacheSize": [126 << 20],
                    "memoryBandwidth": [8_000_000_000_000],
                    "computeMajor": [cc[0]],
                    "computeMinor": [cc[1]],
                }
            ),
        }
        for table, rows in ((S.KERNEL, self.kernels), (S.MEMCPY, self.memcpys), (S.MEMSET, self.memsets),
                            (S.RUNTIME, self.runtime), (S.NVTX, self.nvtx)):  # fmt: skip
            if rows:
                tables[table] = frame(rows)
        return tables

    def write(self, path: str | Path, **kwargs: object) -> Path:
        return write_export(path, self.tables(**kwargs), overwrite=True)  # type: ignore[arg-type]

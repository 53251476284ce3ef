"""What the GPU box was: device, driver, library versions, and the SM clock while timing."""

from __future__ import annotations

import contextlib
import importlib.metadata
import platform
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

_PACKAGES = ("torch", "flashinfer-python", "sgl-flash-mla", "nvtx", "nvidia-ml-py", "traceattr", "polars")


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def gpu_facts() -> dict[str, Any]:
    import torch

    props = torch.cuda.get_device_properties(0)
    facts: dict[str, Any] = {
        "name": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "cuda_runtime": torch.version.cuda,
    }
    nvml = _nvml()
    if nvml is not None:
        handle = nvml.nvmlDeviceGetHandleByIndex(0)
        facts["driver"] = _text(nvml.nvmlSystemGetDriverVersion())
        facts["max_sm_clock_mhz"] = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)
        facts["max_mem_clock_mhz"] = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)
    return facts


def _nvml() -> Any:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver access in this container: run without clock samples
        return None
    return pynvml


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class ClockSampler:
    """Samples SM/memory clocks, temperature and power every *period* s in a thread."""

    period: float = 0.02  # NVML clock queries take microseconds; short shapes still get samples
    samples: list[tuple[float, int, int, int, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _nvml: Any = None
    _handle: Any = None

    def __enter__(self) -> ClockSampler:
        self._nvml = _nvml()
        if self._nvml is not None:
            self._handle = self._nvml.nvmlDeviceGetHandleByIndex(0)
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.period)

    def sample(self) -> None:
        """Take one sample now (also called at the edges of each shape's timed loop)."""
        nvml, handle = self._nvml, self._handle
        if nvml is None:
            return
        # a transient NVML error must not kill the timed loop: skip that sample
        with contextlib.suppress(Exception):
            self.samples.append(
                (
                    time.time(),
                    nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
                    nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
                    nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
                    nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                )
            )

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)

    def summary(self, max_sm_mhz: int | None) -> dict[str, Any]:
        if not self.samples:
            return {"samples": 0, "note": "NVML unavailable: clocks not recorded"}
        sm = [s[1] for s in self.samples]
        out: dict[str, Any] = {
            "samples": len(sm),
            "sm_clock_mhz_median": statistics.median(sm),
            "sm_clock_mhz_min": min(sm),
            "mem_clock_mhz_median": statistics.median(s[2] for s in self.samples),
            "temperature_c_max": max(s[3] for s in self.samples),
            "power_w_median": statistics.median(s[4] for s in self.samples),
        }
        if max_sm_mhz:
            out["sm_clock_share_of_max"] = round(out["sm_clock_mhz_median"] / max_sm_mhz, 3)
            out["low_clock"] = out["sm_clock_share_of_max"] < 0.9
        return out

    def window(self, start: float, end: float, max_sm_mhz: int | None) -> dict[str, Any]:
        """The loaded SM clock over samples taken in ``[start, end]`` (one shape's timed calls).

        ``{sm_clock_mhz_median, sm_clock_max_mhz, fraction, samples}``; ``sm_clock_max_mhz``
        is the GPU's maximum SM clock (NVML), ``fraction`` the median over it. Nones
        when NVML is unavailable or no sample fell inside.
        """
        sm = [s[1] for s in self.samples if start <= s[0] <= end]
        median = statistics.median(sm) if sm else None
        fraction = round(median / max_sm_mhz, 4) if median and max_sm_mhz else None
        return {"sm_clock_mhz_median": median, "sm_clock_max_mhz": max_sm_mhz, "fraction": fraction,
                "samples": len(sm)}  # fmt: skip

"""What every MLA decode backend declares, and the one rule that says whether it can run.

A backend is data (:class:`Capabilities`: which GPUs, KV dtypes, page sizes,
head counts, query layouts it accepts and which packages it needs) plus code
that builds one call. Eligibility is a pure function of the capabilities, the
shape and the device (:func:`rejection_reason`), so ``--dry-run`` can say on any
machine why a backend would be skipped, and tests can check it without a GPU.

Two kinds of failure, as in flashinfer: :class:`~traceattr.core.errors.BackendUnsupported`
means "cannot run this here, skip it and say why"; ``ValueError``/``TypeError``
mean the caller passed something malformed.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from traceattr.core.shapes import SOFTMAX_SCALE_DIM, Shape

SM_SCALE = 1.0 / math.sqrt(SOFTMAX_SCALE_DIM)  # DeepSeek/Kimi: 1/sqrt(qk_nope 128 + qk_rope 64)


@dataclass(frozen=True)
class Device:
    """The GPU a call would run on (what eligibility depends on)."""

    name: str
    cc: tuple[int, int]
    sm_count: int = 0
    memory_bytes: int = 0
    cuda: str | None = None  # CUDA version torch was built with
    l2_bytes: int = 0

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


@dataclass(frozen=True)
class OptionSpec:
    """One option an arm may give a backend (``fa3[splits=4]``), described as data.

    ``field`` names the backend dataclass field the value is set on
    (``dataclasses.replace``); options with no field are the runner's (graphs,
    page, kv). ``program`` says whether the option changes the computed numbers:
    arms whose options differ only in non-program options run the same program
    and must agree bitwise.
    """

    name: str
    help: str
    kind: Literal["flag", "int", "choice"] = "int"
    choices: tuple[str, ...] = ()
    minimum: int = 1
    field: str | None = None
    program: bool = True


@dataclass(frozen=True)
class Capabilities:
    """Everything a backend accepts, as sets and ranges (each rejection names the value and the set)."""

    name: str
    family: str  # kernel family in the role rules (flashinfer-fa3, flashmla, trtllm-gen, …)
    archs: frozenset[tuple[int, int]]  # compute capabilities it runs on
    kv_dtypes: frozenset[str]
    page_sizes: frozenset[int] | None = None  # None: any page size
    heads: tuple[int, int] = (1, 1024)  # inclusive range of query heads
    heads_excluded: tuple[int, int] | None = None  # an open interval it rejects (trtllm-gen: 64 < H < 128)
    heads_by_dtype: Mapping[str, frozenset[int]] = field(default_factory=dict)  # only these H for that KV dtype
    archs_by_dtype: Mapping[str, frozenset[tuple[int, int]]] = field(default_factory=dict)  # ditto, GPUs
    patterns: frozenset[str] = frozenset({"uniform", "ragged", "row"})
    max_q: int | None = None
    packages: tuple[str, ...] = ()  # import names it needs
    supports_graphs: bool = True
    structure: str = ""  # how its kernels split the work, for the plan and the report
    options: tuple[OptionSpec, ...] = ()  # backend-specific arm options (traceattr.backends.arms adds graphs, page, kv)
    lse: bool = False  # prepare(..., lse=True) gives a call whose run() returns (output, base-2 LSE): DCP rows
    dcp_refusal: str | None = None  # why DCP rows are refused even though an LSE could be had (trtllm-gen)
    # other arms that run this very program on some shapes (fa3-per-token is fa3 at q = 1): never a rule between them
    same_program_as: Mapping[str, Callable[[Shape], bool]] = field(default_factory=dict)

    def describe_archs(self) -> str:
        return ", ".join(f"sm_{a}{b}" for a, b in sorted(self.archs))


def rejection_reason(shape: Shape, caps: Capabilities, device: Device | None, *, packages: bool = True) -> str | None:
    """Why *caps* cannot run *shape* on *device*, or None when it can.

    The GPU and the shape are checked before the installed packages: "needs
    sm_90" tells a B200 user more than "flash_mla is not installed".
    With ``packages=False`` only the GPU and the shape are checked.
    """
    reason = _shape_or_device_reason(shape, caps, device)
    if reason or not packages:
        return reason
    missing = [p for p in caps.packages if importlib.util.find_spec(p) is None]
    if missing:
        return f"needs the Python package(s) {', '.join(missing)}, not installed"
    return None


# Tests of the Blackwell paths on a Hopper GPU set this so a call passes traceattr's GPU check and reaches
# the library, whose own architecture refusal is then the arm's reason (docs/profile.md, "Blackwell on
# an H200"). Only the architecture checks are skipped: shapes, dtypes and packages are still checked.
SKIP_ARCH_CHECK_ENV = "TRACEATTR_SKIP_ARCH_CHECK"


def skip_arch_check() -> bool:
    return os.environ.get(SKIP_ARCH_CHECK_ENV, "") not in ("", "0")


def _shape_or_device_reason(shape: Shape, caps: Capabilities, device: Device | None) -> str | None:
    if device is None:
        return f"no CUDA device here (runs on {caps.describe_archs()})"
    skip_arch = skip_arch_check()
    if device.cc not in caps.archs and not skip_arch:
        return f"needs {caps.describe_archs()}, this GPU ({device.name}) is {device.arch}"
    if shape.kv_dtype not in caps.kv_dtypes:
        return f"KV dtype {shape.kv_dtype} not supported (supports {', '.join(sorted(caps.kv_dtypes))})"
    dtype_archs = caps.archs_by_dtype.get(shape.kv_dtype)
    if dtype_archs is not None and device.cc not in dtype_archs and not skip_arch:
        archs = ", ".join(f"sm_{a}{b}" for a, b in sorted(dtype_archs))
        return f"{shape.kv_dtype} KV needs {archs}, this GPU is {device.arch}"
    if caps.page_sizes is not None and shape.page not in caps.page_sizes:
        return f"page size {shape.page} not supported (supports {', '.join(map(str, sorted(caps.page_sizes)))})"
    lo, hi = caps.heads
    if not lo <= shape.heads <= hi:
        return f"{shape.heads} heads not supported (supports {lo}–{hi})"
    if caps.heads_excluded and caps.heads_excluded[0] < shape.heads < caps.heads_excluded[1]:
        a, b = caps.heads_excluded
        return f"{shape.heads} heads not supported ({a} < H < {b} has no kernel)"
    only = caps.heads_by_dtype.get(shape.kv_dtype)
    if only is not None and shape.heads not in only:
        return f"{shape.heads} heads with {shape.kv_dtype} KV not supported (only H in {sorted(only)})"
    if shape.pattern not in caps.patterns:
        return f"query pattern {shape.pattern} not supported (supports {', '.join(sorted(caps.patterns))})"
    if caps.max_q is not None and max(shape.q_lens()) > caps.max_q:
        return f"q={max(shape.q_lens())} query tokens per request not supported (at most {caps.max_q})"
    return None


@dataclass(frozen=True)
class TensorSpec:
    """A tensor argument described without torch: shape and dtype, for plans and CPU tests."""

    shape: tuple[int, ...]
    dtype: str  # torch dtype name: bfloat16, float8_e4m3fn, int32, uint8, float32

    @property
    def nbytes(self) -> int:
        size = {"bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "int32": 4, "uint8": 1, "float32": 4}[self.dtype]
        return math.prod(self.shape) * size


@dataclass(frozen=True)
class CallPlan:
    """The arguments of one backend call, described as data (testable on a CPU).

    ``tensors`` name each tensor argument's spec; ``scalars`` the rest. A
    backend's GPU code materialises exactly this plan.
    """

    backend: str
    shape: Shape
    tensors: Mapping[str, TensorSpec]
    scalars: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


class Call(Protocol):
    """One prepared call: inputs built, plan done; ``run`` launches exactly the timed work."""

    plan: CallPlan

    def run(self) -> Any:
        """Launch the call once (asynchronously); returns the output tensor.

        Prepared with ``lse=True`` (backends whose capabilities say ``lse``): returns
        ``(output, lse)``, the LSE ``[rows, heads]`` fp32 in base 2, rows as ``output_rows``.
        """

    def output_rows(self, out: Any) -> Any:
        """*out* as ``[total_query_rows, heads, 512]`` in request order, for validation."""


class Backend(Protocol):
    caps: ClassVar[Capabilities]

    def plan(self, shape: Shape) -> CallPlan:
        """The call's arguments as data; raises BackendUnsupported when it cannot be built."""

    def prepare(self, shape: Shape, inputs: Any, *, lse: bool = False) -> Call:
        """Build the call on the GPU from shared inputs (see backends.inputs); ``lse`` only if caps.lse."""

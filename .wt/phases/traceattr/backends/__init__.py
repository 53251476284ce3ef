"""The registry of MLA decode backends traceattr can time.

Importing this package imports no torch: capabilities and plans are data,
so ``traceattr profile --dry-run`` and the tests run anywhere; GPU code is
imported inside ``prepare``.
"""

from __future__ import annotations

from collections.abc import Mapping

from traceattr.backends.base import Backend, CallPlan, Capabilities, Device, OptionSpec, rejection_reason
from traceattr.backends.flashinfer_trtllm import CAKE, CUTE_DSL, TRTLLM_GEN, TrtllmDecode
from traceattr.backends.flashinfer_wrapper import FlashinferMLA
from traceattr.backends.flashmla import FlashMLA
from traceattr.backends.plugins import entry_point_backends, is_spec, load_spec
from traceattr.core.errors import BackendUnsupported, TraceattrError
from traceattr.core.shapes import Shape

# The split-KV lever: the same call as N requests per original one, then flashinfer's merge_states.
SPLITS = OptionSpec(
    "splits",
    "split each request's KV into N page-aligned chunks run as N requests (LSE in base 2), then merge the "
    "N partial results with flashinfer's separate merge_states kernel",
    minimum=1,
    field="splits",
)
_FA2_ARCHS = frozenset({(8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (10, 7), (11, 0), (12, 0), (12, 1)})
FA3 = Capabilities(
    name="fa3",
    family="flashinfer-fa3",
    archs=frozenset({(9, 0)}),
    kv_dtypes=frozenset({"bf16", "fp8"}),
    packages=("flashinfer",),
    structure="one persistent kernel; split-KV merge inside, after a grid sync",
    options=(SPLITS,),
    lse=True,
)
FA2 = Capabilities(
    name="fa2",
    family="flashinfer-fa2",
    archs=_FA2_ARCHS,
    kv_dtypes=frozenset({"bf16", "fp8"}),
    archs_by_dtype={"fp8": frozenset({(9, 0)})},  # its fp8 KV path is Hopper-only
    packages=("flashinfer",),
    structure="one persistent kernel; split-KV merge inside, after a grid sync",
    options=(SPLITS,),
    lse=True,
)
FA3_PER_TOKEN = Capabilities(
    name="fa3-per-token",
    family="flashinfer-fa3",
    archs=FA3.archs,
    kv_dtypes=FA3.kv_dtypes,
    patterns=frozenset({"uniform", "ragged"}),
    packages=("flashinfer",),
    structure="fa3 with each verify token a separate request: no folding, time grows with q",
    same_program_as={"fa3": lambda shape: shape.q == 1},  # one token per request either way
)

BACKENDS: Mapping[str, Backend] = {
    "fa3": FlashinferMLA(FA3, "fa3"),
    "fa2": FlashinferMLA(FA2, "fa2"),
    "fa3-per-token": FlashinferMLA(FA3_PER_TOKEN, "fa3", per_token=True),
    "flashmla": FlashMLA(),
    "trtllm-gen": TrtllmDecode(TRTLLM_GEN),
    "cute-dsl": TrtllmDecode(CUTE_DSL),
    "cake": TrtllmDecode(CAKE),
}  # type: ignore[dict-item]


def registry() -> dict[str, Backend]:
    """Every backend by name: the built-ins, then those installed packages register as entry points."""
    found = dict(BACKENDS)
    for name, backend in entry_point_backends().items():
        if name in found:
            raise TraceattrError(f"entry point {name!r} in group traceattr.backends clashes with a built-in backend")
        found[name] = backend
    return found


def get_backend(name: str) -> Backend:
    """A registry name (``fa3``) or a plug-in spec (``my_pkg.my_mod:MyBackend``) as a backend."""
    if is_spec(name):
        return load_spec(name)
    if name in BACKENDS:
        return BACKENDS[name]
    known = registry()
    if name not in known:
        raise TraceattrError(f"unknown backend {name!r}; known: {', '.join(known)} (or a plug-in package.module:Class)")
    return known[name]


def check(name: str, shape: Shape, device: Device | None, *, packages: bool = True) -> CallPlan:
    """The plan of *name* for *shape*, or :class:`BackendUnsupported` saying why not."""
    backend = get_backend(name)
    reason = rejection_reason(shape, backend.caps, device, packages=packages)
    if reason:
        raise BackendUnsupported(f"{name}: {reason}")
    return backend.plan(shape)


def current_device() -> tuple[Device | None, str | None]:
    """(the CUDA device torch sees, None) or (None, why there is none)."""
    try:
        import torch
    except ImportError:
        return None, "torch is not installed (pip install 'traceattr[gpu]')"
    if not torch.cuda.is_available():
        return None, "no CUDA GPU visible to torch"
    props = torch.cuda.get_device_properties(0)
    return (
        Device(
            props.name, (props.major, props.minor), props.multi_processor_count, props.total_memory, torch.version.cuda
        ),
        None,
    )


# The GPUs ``profile --dry-run --arch`` can plan for on any machine: what eligibility and the plan read
# (compute capability, SM count, L2 for the flush size). Only facts the plan uses; memory is not checked.
PLANNING_DEVICES: Mapping[str, Device] = {
    "sm_90": Device("NVIDIA H200 (planned)", (9, 0), 132, 141 << 30, None, 60 << 20),
    "sm_100": Device("NVIDIA B200 (planned)", (10, 0), 148, 180 << 30, None, 126 << 20),
}


def planning_device(arch: str) -> Device:
    """The GPU *arch* names (``sm_100``), to plan for without it; one-line TraceattrError for an unknown one."""
    key = arch.strip().lower()
    key = key if key.startswith("sm_") else "sm_" + key.removeprefix("sm")  # sm100 and 100 name sm_100 too
    if key not in PLANNING_DEVICES:
        raise TraceattrError(f"--arch {arch!r}: plans are known for {', '.join(PLANNING_DEVICES)}")
    return PLANNING_DEVICES[key]


def gpu_count() -> int:
    """How many CUDA GPUs torch sees (0 without torch or CUDA): a real DCP run needs one per rank."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


__all__ = [
    "BACKENDS", "PLANNING_DEVICES", "SPLITS", "CallPlan", "Capabilities", "Device", "OptionSpec", "check", "current_device",
    "get_backend", "gpu_count", "planning_device", "registry",
]  # fmt: skip

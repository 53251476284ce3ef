"""Blackwell on any machine: real kernel names get their role and family; the arch check can be skipped.

``tests/data/blackwell_kernel_names.toml`` holds names the Blackwell routes launch, each with the
file of flashinfer's wheel it came from (or the public trace, for trtllm-gen's downloaded cubins).
The golden test classifies each with the shipped rules; where flashinfer is installed (the H200's
bundle, or ``PYTHONPATH`` at an unpacked wheel) each entry's evidence is looked up in its file, so a
flashinfer that renames a program or a class fails here. No import of flashinfer (it needs torch):
the package is only located.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.helpers import DATA
from traceattr.attribution.roles import RoleRules
from traceattr.backends.arms import check_arm, parse_arm
from traceattr.backends.base import SKIP_ARCH_CHECK_ENV, Device
from traceattr.core.errors import BackendUnsupported
from traceattr.core.shapes import parse_shape

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

NAMES_FILE = DATA / "blackwell_kernel_names.toml"
KERNELS = tomllib.loads(NAMES_FILE.read_text(encoding="utf-8"))["kernel"]
WHEEL = [k for k in KERNELS if k["source"].startswith("flashinfer/")]
H200 = Device("NVIDIA H200", (9, 0), 132)


def test_the_names_are_real_and_enough() -> None:
    """≥ 10 names from the wheel, every route named in the issue among them, each with a source."""
    assert len(WHEEL) >= 10
    assert all(k["evidence"] for k in WHEEL) and all(k["source"] for k in KERNELS)
    text = "\n".join(k["name"] for k in KERNELS)
    for needle in ("fmhaSm100f", "SwapsAbForGen", "fmhaReductionKernel", "mla_decode", "kernel_cutlass_reduction_kernel",
                   "kernel_cake_trtllm_mla_blackwell_", "kernel_cake_kimi_k3_mla_"):  # fmt: skip
        assert needle in text, needle
    assert len({k["name"] for k in KERNELS}) == len(KERNELS)


@pytest.mark.parametrize("kernel", KERNELS, ids=[k["name"][:60] for k in KERNELS])
def test_real_blackwell_names_get_their_role_and_family(kernel: dict[str, str]) -> None:
    ((role, family),) = RoleRules.default().classify_names_families([kernel["name"]])
    assert (role, family) == (kernel["role"], kernel["family"]), kernel["note"]


def test_the_golden_test_can_fail() -> None:
    """A reducer hash dropped from the rules would make that reducer 'attention': the test above would say so."""
    reducers = [k["name"] for k in KERNELS if k["family"] == "cake" and k["role"] == "reduce"]
    looks_main = [n.replace(n[-20:], "0" * 20) for n in reducers]  # the same route, another hash
    assert {r for r, _ in RoleRules.default().classify_names_families(looks_main)} == {"attention"}


def _wheel_root() -> Path | None:
    spec = importlib.util.find_spec("flashinfer")  # locates the package without importing it (no torch needed)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


@pytest.mark.parametrize("kernel", WHEEL, ids=[k["name"][:60] for k in WHEEL])
def test_each_name_is_in_the_installed_wheel(kernel: dict[str, object]) -> None:
    root = _wheel_root()
    if root is None:
        pytest.skip("flashinfer is not installed here")
    path = root / str(kernel["source"])
    if not path.is_file():
        pytest.skip(f"{kernel['source']} is not in this flashinfer (a trimmed bundle?)")
    text = path.read_text(encoding="utf-8")
    for evidence in kernel["evidence"]:  # type: ignore[attr-defined]
        assert evidence in text, (kernel["source"], evidence)


def test_skip_arch_check_lets_a_blackwell_arm_through_on_hopper(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the GPU check is skipped: the shape checks still refuse, so flashinfer sees only calls a B200 would."""
    shape = parse_shape("q8_ctx131k_h12")
    with pytest.raises(BackendUnsupported, match=r"needs sm_100, sm_103, sm_107, this GPU \(NVIDIA H200\) is sm_90"):
        check_arm(parse_arm("cute-dsl"), shape, H200, packages=False)
    monkeypatch.setenv(SKIP_ARCH_CHECK_ENV, "1")
    assert check_arm(parse_arm("cute-dsl"), shape, H200, packages=False).scalars["backend"] == "cute-dsl"
    with pytest.raises(BackendUnsupported, match="12 heads with bf16 KV not supported"):
        check_arm(parse_arm("cake"), shape, H200, packages=False)
    with pytest.raises(BackendUnsupported, match="page size 16 not supported"):
        check_arm(parse_arm("trtllm-gen[page=16]"), shape, H200, packages=False)
    monkeypatch.setenv(SKIP_ARCH_CHECK_ENV, "0")
    with pytest.raises(BackendUnsupported, match="needs sm_10"):
        check_arm(parse_arm("trtllm-gen"), shape, H200, packages=False)

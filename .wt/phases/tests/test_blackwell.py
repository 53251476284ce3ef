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


# The seeds' B200 rows: TP8 (H = 12 of the model's 96 heads) and TP1+DCP8 (all 96 heads, the context over 8
# ranks), ctx ~125k, bf16 and fp8, q 1/2/4/8. Their table: DCP "ERR" for trtllm-gen ("DCP: cute-dsl only"),
# cute-dsl timed (129.3 / 170.3 µs at q1 / q8 on the DCP row).
SEED_ROWS = [f"q{q}_ctx125k_{rest}{kv}" for rest in ("h12", "h96_dcp8") for kv in ("", "_fp8") for q in (1, 2, 4, 8)]


def test_dry_run_plans_the_seeds_b200_rows_anywhere(tmp_path: Path) -> None:
    from traceattr.jobs.profile import make_plan

    plan = make_plan([parse_shape(s) for s in SEED_ROWS], ["trtllm-gen", "cute-dsl"], out_root=tmp_path, arch="sm_100")
    assert plan.device is not None and plan.device.cc == (10, 0) and plan.device_problem is None
    assert plan.run.flush_bytes == 2 * (126 << 20)  # 2× the B200's L2
    got = {(a.shape, a.backend): a.reason for a in plan.availability}
    assert len(got) == 2 * len(SEED_ROWS)
    for name in SEED_ROWS:
        full = parse_shape(name).name
        if "dcp8" in name:  # the table's ERR cell, with its reason; cute-dsl is the DCP path
            assert got[(full, "trtllm-gen")] == "DCP: cute-dsl only — trtllm's decode kernel doesn't implement DCP"
        else:
            assert got[(full, "trtllm-gen")] is None, got[(full, "trtllm-gen")]
        assert got[(full, "cute-dsl")] is None, got[(full, "cute-dsl")]
    assert not any(tmp_path.iterdir())  # planning creates nothing


def test_arch_names_a_planning_gpu_or_says_which_are_known() -> None:
    from traceattr.backends import planning_device
    from traceattr.core.errors import TraceattrError

    assert planning_device("sm_100") == planning_device("sm100") == planning_device("100")
    assert planning_device("SM_90").cc == (9, 0)
    with pytest.raises(TraceattrError, match=r"--arch 'sm_120': plans are known for sm_90, sm_100"):
        planning_device("sm_120")


@pytest.mark.slow
def test_profile_dry_run_arch_on_the_command_line(tmp_path: Path) -> None:
    import os
    import subprocess

    args = [sys.executable, "-m", "traceattr", "profile", "--shape", "q8_ctx125k_h96_dcp8", "-b", "trtllm-gen",
            "-b", "cute-dsl", "--out-root", str(tmp_path)]  # fmt: skip
    env = {**os.environ, "COLUMNS": "250"}
    out = subprocess.run([*args, "--dry-run", "--arch", "sm_100"], capture_output=True, text=True, check=False, env=env)
    assert out.returncode == 0, out.stderr
    assert "NVIDIA B200 (planned) (sm_100, 148 SMs)" in out.stdout
    assert "trtllm's decode kernel doesn't implement DCP" in out.stdout
    bad = subprocess.run([*args, "--arch", "sm_100"], capture_output=True, text=True, check=False, env=env)
    assert bad.returncode == 2 and "--arch plans for a GPU" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1

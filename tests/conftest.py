"""Shared fixtures: the real exports in tests/data, decompressed once per session."""

from __future__ import annotations

import atexit
import lzma
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.helpers import DATA, FIXTURES

# the stand-in reports' Arrow exports (traceattr.trace.nsys.export_cache) go here, not into the user's cache, and
# go with the session (test processes started by this one inherit the variable and share the folder)
if "TRACEATTR_EXPORT_CACHE" not in os.environ:
    os.environ["TRACEATTR_EXPORT_CACHE"] = tempfile.mkdtemp(prefix="traceattr-tests-export-cache-")
    atexit.register(shutil.rmtree, os.environ["TRACEATTR_EXPORT_CACHE"], ignore_errors=True)


def _export_xz(name: str) -> Path:
    hits = sorted((DATA / name).glob("*.sqlite.xz"))
    if len(hits) != 1:
        raise FileNotFoundError(f"tests/data/{name}: expected one .sqlite.xz, found {len(hits)}")
    return hits[0]


@pytest.fixture(scope="session")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fixture name -> path of its decompressed .sqlite (read-only)."""
    root = tmp_path_factory.mktemp("exports")
    out = {}
    for name in FIXTURES:
        src = _export_xz(name)
        dst = root / name / src.name.removesuffix(".xz")
        dst.parent.mkdir()
        with lzma.open(src) as fin, dst.open("wb") as fout:
            shutil.copyfileobj(fin, fout)
        dst.chmod(0o444)
        out[name] = dst
    return out


@pytest.fixture
def hopper(monkeypatch: pytest.MonkeyPatch) -> None:
    """On an sm_90 GPU only, the Blackwell backends let through to flashinfer's own architecture refusal
    (traceattr's arch check off, flashinfer's cubin download off: nothing outside the machine is reached)."""
    from traceattr.backends import current_device
    from traceattr.backends.base import SKIP_ARCH_CHECK_ENV

    device, why = current_device()
    assert device is not None, why
    if device.cc != (9, 0):
        pytest.skip(f"an sm_90 expectation; this GPU is {device.arch}")
    monkeypatch.setenv(SKIP_ARCH_CHECK_ENV, "1")
    monkeypatch.setenv("FLASHINFER_NO_DOWNLOAD", "1")


@pytest.fixture(scope="session")
def stamped_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile run folder of both arms with stamps and floor probes (tests/synth/stamped.py); read only."""
    from tests.synth.stamped import stamped_folder

    folder = tmp_path_factory.mktemp("stamped") / "run"
    stamped_folder(folder)
    return folder

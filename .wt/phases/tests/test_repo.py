"""The repository points only at files it contains, and CI tests the floors pyproject.toml declares."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = ("benchmarks/", "examples/", "tests/", "traceattr/", ".ci/", "reports/")
LINK = re.compile(r"\]\(([^)\s]+)\)")  # markdown links and images
CODE = re.compile(r"`([^`\s]+)`")  # a backticked token without spaces (a command line has spaces)


def _markdown() -> list[Path]:
    return [
        p
        for p in ROOT.rglob("*.md")
        if not any(part.startswith(".") or part.endswith(".egg-info") for part in p.relative_to(ROOT).parts[:-1])
    ]


def _targets(doc: Path) -> list[tuple[str, Path]]:
    """(reference, the path it names) for each link and backticked repository path in *doc*."""
    text = doc.read_text(encoding="utf-8")
    out = []
    for ref in LINK.findall(text):
        if not re.match(r"^[a-z]+:|^#", ref):
            out.append((ref, doc.parent / ref.split("#")[0]))
    for ref in CODE.findall(text):
        if re.search(r"[<>*…|{}]", ref):  # a pattern or placeholder, not a file
            continue
        if doc.name == "SOURCE.md" and not ref.startswith("../"):  # provenance: paths in the upstream repository
            continue
        if ref.startswith(("../", "./")):
            out.append((ref, doc.parent / ref))
        elif ref.startswith(TOP):
            out.append((ref, ROOT / ref))
    return out


def test_documents_point_at_files_the_repository_contains() -> None:
    docs = _markdown()
    assert ROOT / "README.md" in docs and ROOT / "tests" / "data" / "README.md" in docs
    missing = [f"{doc.relative_to(ROOT)}: {ref}" for doc in docs for ref, path in _targets(doc) if not path.exists()]
    assert not missing, missing


def test_floors_cover_every_declared_dependency() -> None:
    spec = importlib.util.spec_from_file_location("floors", ROOT / ".ci" / "floors.py")
    assert spec is not None and spec.loader is not None
    floors = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(floors)
    pinned = floors.floors(ROOT / "pyproject.toml", ["dev"])
    names = {line.split("==")[0] for line in pinned}
    for name in ("polars", "adbc-driver-sqlite", "plotly", "typer", "rich", "scipy", "pytest", "hypothesis"):
        assert name in names, name
    assert all(re.fullmatch(r"[\w.-]+==[\w.]+( ; .+)?", line) for line in pinned), pinned

"""The package's layers, as folders, import only downwards: checked on every import, function-local ones included.

The flow (README's Layout): core ← trace ← attribution ← analysis ← present ← jobs ← cli, with the GPU
side (backends ← runner, backends ← runtime) beside it, which jobs may drive and nothing below jobs may import.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "traceattr"

# layer -> the layers its modules may import besides their own
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "trace": {"core"},
    "attribution": {"core", "trace"},
    "analysis": {"core", "trace", "attribution"},
    "present": {"core", "trace", "attribution", "analysis", "phases"},
    # in-kernel stamps beside nsys's kernels (docs/phases.md): reads a run folder's files, no torch
    "phases": {"core"},
    "backends": {"core"},
    "runner": {"core", "backends"},
    # the dispatcher a decode loop loads (tables, static buffers, graphs): GPU side, beside the runner
    "runtime": {"core", "backends"},
    "jobs": {"core", "trace", "attribution", "analysis", "present", "phases", "backends", "runner", "runtime"},
    # the public facade (traceattr.open / Session): reading, attribution, analysis, and the backends'
    # declarations of which arms run one program (pure data: no GPU package), so it decides as compare does
    "facade": {"core", "trace", "attribution", "analysis", "backends"},
    "cli": {
        "core",
        "trace",
        "attribution",
        "analysis",
        "present",
        "phases",
        "backends",
        "runner",
        "runtime",
        "jobs",
        "facade",
    },
    "main": {"cli"},
}
TOP_MODULES = {"__init__.py": "facade", "session.py": "facade", "__main__.py": "main"}
# GPU packages only the GPU side may import (the attribution core never imports torch)
GPU_PACKAGES = {"torch", "flashinfer", "flash_mla", "sgl_kernel", "nvtx", "pynvml", "triton"}


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__version__":
        return "facade"
    if parts[1] in ("session",):
        return "facade"
    if parts[1] == "__main__":
        return "main"
    return parts[1]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in *path*, anywhere in it; relative imports resolved."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            out.append((node.lineno, name))
            # `from traceattr import x` imports the module traceattr.x when there is one
            out += [(node.lineno, f"{name}.{a.name}") for a in node.names if _is_module(f"{name}.{a.name}")]
    return out


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (PACKAGE.parent / rel.with_suffix(".py")).is_file() or (PACKAGE.parent / rel / "__init__.py").is_file()


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_only_the_facade_and_entry_point_sit_at_the_top() -> None:
    top = {p.name for p in PACKAGE.glob("*.py")}
    assert top == set(TOP_MODULES), f"modules loose at the package top: {sorted(top - set(TOP_MODULES))}"
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders == set(ALLOWED) - {"facade", "main"}, folders


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_layer_order(path: Path) -> None:
    module = _module_name(path)
    mine = TOP_MODULES[path.name] if path.parent == PACKAGE else _layer(module)
    wrong = []
    for line, name in _imports(path):
        root = name.split(".")[0]
        if root in GPU_PACKAGES and mine not in ("backends", "runner", "runtime"):
            wrong.append(f"line {line}: {name} (GPU packages belong to backends/runner/runtime)")
        if root != "traceattr" or name == "traceattr":
            continue
        theirs = _layer(name)
        if theirs != mine and theirs not in ALLOWED[mine]:
            wrong.append(f"line {line}: {name} ({mine} may not import {theirs})")
    assert not wrong, f"{path.relative_to(PACKAGE)}: " + "; ".join(wrong)


@pytest.mark.slow
def test_no_import_cycle_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for path in SOURCES:
        deps = set()
        for _line, name in _imports(path):
            while name.startswith("traceattr.") and not _is_module(name):
                name = name.rpartition(".")[0]
            if name.startswith("traceattr.") and name != _module_name(path):
                deps.add(name)
        graph[_module_name(path)] = deps
    # a package's __init__ importing its own submodules is how Python packages are built, not a cycle
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in graph.get(node, ()):
            if dep.startswith(node + "."):
                continue
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                if not all(b.startswith(a + ".") or a.startswith(b + ".") for a, b in itertools.pairwise(cycle)):
                    raise AssertionError("import cycle: " + " -> ".join(cycle))
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


TESTS = PACKAGE.parent / "tests"


@pytest.mark.parametrize("path", sorted(TESTS.rglob("*.py")), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_module_imports_another(path: Path) -> None:
    """Shared helpers live in tests/helpers.py, tests/synth and conftest fixtures, never in a test module
    (importing one runs its module-level fixtures and tests' imports, and ties the files together)."""
    wrong = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if not node.level else [f".{node.module or ''}"]
            names += [f"{names[0]}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            last = name.rstrip(".").split(".")[-1]
            if (
                name.startswith(("tests.", ".")) and (last.startswith("test_") or last == "conftest")
            ) and last != path.stem:
                wrong.append(f"line {node.lineno}: {name}")
    assert not wrong, f"{path.relative_to(TESTS)} imports a test module: " + "; ".join(sorted(set(wrong)))

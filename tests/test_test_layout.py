"""The map in tests/README.md stays true: every test file names a module of traceattr/ or is a listed theme file.

A module renamed without its test file (``attribution/placement.py`` → ``…/where.py`` leaving
``test_placement.py``) leaves a file that names nothing: this fails until the test file follows or the map
lists it as a theme.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
THEME_ROW = re.compile(r"^\| \[(test_\w+\.py)\]\(\1\) \|", re.MULTILINE)  # a row of README's theme table


def module_names(package: Path = ROOT / "traceattr") -> set[str]:
    """What a module file may be named after: a module or package's name (``placement``, ``cli``), or the
    module with its package (``runner_loop`` for runner/loop.py, where the bare name says too little)."""
    names = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.add(parts[-1])
        if len(parts) > 2:
            names.add(f"{parts[-2]}_{parts[-1]}")
    return names


def theme_files(readme: str) -> list[str]:
    return THEME_ROW.findall(readme)


def unmapped(test_files: list[str], modules: set[str], themes: list[str]) -> list[str]:
    """The test files that name no module and are not listed as themes."""
    return sorted(
        f for f in test_files if f.removesuffix(".py").removeprefix("test_") not in modules and f not in themes
    )


def test_every_test_file_names_a_module_or_is_a_listed_theme() -> None:
    themes = theme_files((TESTS / "README.md").read_text(encoding="utf-8"))
    missing = unmapped([p.name for p in TESTS.glob("test_*.py")], module_names(), themes)
    assert not missing, f"name no module of traceattr/ and are not theme files in tests/README.md: {missing}"


def test_listed_themes_exist_and_name_no_module() -> None:
    themes = theme_files((TESTS / "README.md").read_text(encoding="utf-8"))
    assert len(themes) == len(set(themes)) and len(themes) > 10  # the table was read
    assert [f for f in themes if not (TESTS / f).is_file()] == []
    # a module's own file is not a theme: listing it would hide the module's rename
    modules = module_names()
    assert [f for f in themes if f.removesuffix(".py").removeprefix("test_") in modules] == []


def test_a_module_renamed_without_its_tests_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "traceattr"
    (package / "attribution").mkdir(parents=True)
    for name in ("__init__.py", "attribution/__init__.py", "attribution/placement.py"):
        (package / name).write_text("")
    files = ["test_placement.py", "test_golden.py"]
    readme = "| [test_golden.py](test_golden.py) | against nsys |\n"
    assert unmapped(files, module_names(package), theme_files(readme)) == []
    (package / "attribution/placement.py").rename(package / "attribution/where.py")
    assert unmapped(files, module_names(package), theme_files(readme)) == ["test_placement.py"]

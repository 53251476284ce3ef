"""Print a pip constraints file that pins every declared lower bound (``name>=X`` -> ``name==X``).

    python .ci/floors.py [EXTRA ...] > floors.txt

Reads pyproject.toml's runtime dependencies and the named extras, so the
floors CI tests are the ones the package declares, never a second list.
A requirement without a ``>=`` bound is left to the resolver; a package
floored twice (a runtime dependency and an extra) is pinned at the higher one.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

FLOOR = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*>=\s*([0-9][\w.]*)\s*(?:,[^;]*)?(;.*)?$")


def floors(pyproject: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    pins: dict[tuple[str, str], str] = {}  # (name, marker) -> the highest floor: what pip can actually resolve
    for req in requirements:
        m = FLOOR.match(req)
        if m:
            name, version, marker = m.groups()
            key = (re.sub(r"[-_.]+", "-", name).lower(), marker or "")
            if key not in pins or _release(version) > _release(pins[key]):
                pins[key] = version
    return [f"{name}=={version}{(' ' + marker) if marker else ''}" for (name, marker), version in pins.items()]


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


if __name__ == "__main__":
    print("\n".join(floors(Path(__file__).resolve().parents[1] / "pyproject.toml", sys.argv[1:])))

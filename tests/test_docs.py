"""README.md and the manual in docs/: every relative link resolves (the file, and the heading of a #anchor),
and the README stays one short front page (the manual lives in docs/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")  # markdown links and images
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)
README_MAX_LINES = 260  # the issue asks for ≤ ~250: a front page, not the manual


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    """The anchors of *page*'s headings; a repeated heading gets -1, -2, … as GitHub numbers them."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = _slug(heading)
        out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return out


def _broken(page: Path) -> list[str]:
    """The relative links of *page* (outside code blocks) whose file or heading is missing."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    broken = []
    for ref in LINK.findall(text):
        if re.match(r"^[a-z]+:", ref):  # https:, mailto: — not ours to check offline
            continue
        file, _, anchor = ref.partition("#")
        target = (page.parent / file).resolve() if file else page
        if not target.exists():
            broken.append(f"{ref}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{ref}: no heading #{anchor} in {target.relative_to(ROOT)}")
    return broken


def test_the_manual_has_its_pages() -> None:
    names = {p.name for p in PAGES}
    for page in ("profile", "round", "attribute", "compare", "report", "diff", "sweep", "dispatch", "many-traces"):
        assert f"{page}.md" in names, page  # one page per command
    for page in ("statistics", "files", "schemas", "speed", "dependencies", "layout"):
        assert f"{page}.md" in names, page  # one page per concept


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    assert not _broken(page)


def test_docs_index_and_readme_link_every_page() -> None:
    for index in (ROOT / "README.md", ROOT / "docs" / "README.md"):
        text = index.read_text(encoding="utf-8")
        linked = {(index.parent / ref.partition("#")[0]).resolve() for ref in LINK.findall(text)}
        missing = [p.name for p in PAGES[1:] if p.name != "README.md" and p.resolve() not in linked]
        assert not missing, f"{index.relative_to(ROOT)} does not link {missing}"


def test_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md is {lines} lines: move the detail to docs/"


def test_the_slug_is_githubs() -> None:
    assert _slug("`traceattr.dispatch/1` (`compare --json`)") == "traceattrdispatch1-compare---json"
    assert _slug("Calls (`calls.csv`)") == "calls-callscsv"
    assert _slug("Real DCP ranks: `--ranks N`") == "real-dcp-ranks---ranks-n"

"""One colour per backend: keyed by its name, the same on a trace's report and on a sweep page."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import SWEEP, page_figures, run
from traceattr.present.palette import KNOWN, backend_color, backend_colors

EAGER = Path(__file__).parents[1] / "examples" / "sweeps" / "h200_q8_fa3_flashmla_eager.json"


def test_a_colour_follows_the_name_not_its_company() -> None:
    alone = backend_colors(["fa3"])
    crowd = backend_colors(["aaa", "fa2", "fa3", "flashmla", "zzz"])
    assert alone["fa3"] == crowd["fa3"] == KNOWN["fa3"]
    assert backend_color("fa3[graphs]") == backend_color("fa3")
    assert backend_color("someone-new") == backend_color("someone-new")  # a stable hash, not the run's order
    assert len({KNOWN[b] for b in ("fa3", "flashmla", "fa2", "fa3-per-token")}) == 4


def _colours(page: str) -> dict[str, set[str]]:
    """Per trace name that is a backend, the marker and line colours the page draws it in."""
    seen: dict[str, set[str]] = {}
    for fig in page_figures(page).values():
        for trace in fig["data"]:
            name = str(trace.get("legendgroup") or trace.get("name") or "")
            for colour in (trace.get("marker", {}).get("color"), trace.get("line", {}).get("color")):
                if isinstance(colour, str) and name:
                    seen.setdefault(name.split(" ")[0], set()).add(colour)
    return seen


@pytest.mark.slow
def test_fa3_and_flashmla_are_one_colour_on_two_pages(tmp_path: Path) -> None:
    pages = []
    for source, name in ((SWEEP, "trace.html"), (EAGER, "sweep.html")):
        done = run("report", str(source), "-o", str(tmp_path / name))
        assert done.returncode == 0, done.stderr
        pages.append(_colours((tmp_path / name).read_text(encoding="utf-8")))
    for backend in ("fa3", "flashmla"):
        on_both = [page.get(backend) for page in pages]
        assert all(on_both), (backend, pages)
        assert all(colours == {KNOWN[backend]} for colours in on_both), (backend, on_both)


def test_a_phase_is_coloured_by_its_boundary_and_no_two_share_one() -> None:
    from traceattr.present.palette import PHASE_KNOWN, PHASE_OTHERS, phase_boundary, phase_colors

    names = ["split_kv:launch", "split_kv:merged", "gap→reduce", "reduce:merged", "k:alpha", "k:beta", "other"]
    colors = phase_colors(names)
    assert phase_boundary("gap→reduce") == "gap" and phase_boundary("split_kv:loop_done") == "loop_done"
    assert colors["split_kv:merged"] == colors["reduce:merged"] == PHASE_KNOWN["merged"]  # one boundary, one colour
    assert colors["gap→reduce"] == PHASE_KNOWN["gap"]
    unknown = [colors[n] for n in ("k:alpha", "k:beta", "other")]
    assert unknown == list(PHASE_OTHERS[:3]) and not set(unknown) & set(PHASE_KNOWN.values())
    assert phase_colors(["k:beta"])["k:beta"] == PHASE_OTHERS[0]  # the others follow the page's order

"""One colour per backend, keyed by its name: the same on every HTML page, in every run, and on the terminal;
and one per phase inside a kernel, keyed by its boundary's name (below).

A colour follows the backend's name, not its position among the backends a page happens to show, so fa3 is
the same colour in a sweep report, a round report and a sweep page. The backends traceattr ships get fixed
colours chosen apart (FlashMLA's magenta and fa3's teal, fa2's mustard far from both); any other name gets one
of the rest by a stable hash of its name. An arm label (``fa3[graphs]``) is coloured as its backend. None of
these shares a hue with the role colours of :mod:`traceattr.present.report.style`.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable

KNOWN: dict[str, str] = {
    "fa3": "#1b9e77",
    "flashmla": "#e7298a",
    "fa2": "#e6ab02",
    "fa3-per-token": "#7570b3",
    "flashinfer": "#17becf",
    "flashinfer-mla": "#17becf",
    "trtllm-gen": "#a6761d",
    "triton": "#666666",
}
# for names not above: hues still apart from the roles and from the known backends
OTHERS: tuple[str, ...] = ("#b15928", "#6a3d9a", "#fb9a99", "#cab2d6", "#b2df8a", "#1f78b4", "#ff7f00", "#000000")

_ARM = re.compile(r"\[.*\]$")  # fa3[graphs]: an arm of fa3


def backend_color(backend: str) -> str:
    """The colour of *backend* (``#rrggbb``), the same wherever it is drawn."""
    name = _ARM.sub("", backend).strip().lower()
    if name in KNOWN:
        return KNOWN[name]
    return OTHERS[zlib.crc32(name.encode("utf-8", "surrogateescape")) % len(OTHERS)]


def backend_colors(backends: Iterable[str]) -> dict[str, str]:
    """Each of *backends* with its colour."""
    return {b: backend_color(b) for b in backends}


# -- phases inside a kernel (traceattr.phases): one colour per boundary name, the same in every figure ------------
# A phase is named after the boundary it ends at (``split_kv:loop_done``); its colour follows that boundary,
# whatever the kernel, so a merge is red in the split kernel and in the reduce kernel (which figures tell apart
# by a hatch). The known ones are split-mla's (examples/split_mla) and the pipeline's own; others take the
# remaining colours in the order given, so no two phases of one page share one.
PHASE_KNOWN: dict[str, str] = {
    "launch": "#bab0ac",  # waiting for an SM: light grey
    "begin": "#bab0ac",
    "tile_loaded": "#4e79a7",
    "loaded": "#4e79a7",
    "first_mma": "#76b7b2",
    "loop_done": "#59a14f",  # the main loop: green, usually the widest
    "done": "#59a14f",
    "stored": "#edc948",
    "merged": "#e15759",  # the merge: the lever of issue 35
    "teardown": "#79706e",  # the other CTAs' tails and exit: dark grey
    "gap": "#d9d9d9",  # between two kernels of a call: nothing of this call runs
}
PHASE_OTHERS: tuple[str, ...] = ("#f28e2b", "#b07aa1", "#ff9da7", "#9c755f", "#8cd17d", "#499894", "#d37295",
                                 "#fabfd2", "#b6992d", "#86bcb6")  # fmt: skip
PHASE_KERNEL = "#555555"  # nsys's record of a kernel, drawn above its CTAs


def phase_boundary(phase: str) -> str:
    """The boundary a call's phase ends at: ``loop_done`` of ``split_kv:loop_done``, ``gap`` of ``gap→reduce``."""
    return "gap" if phase.startswith("gap→") else phase.rsplit(":", 1)[-1]


def phase_colors(phases: Iterable[str]) -> dict[str, str]:
    """Each of *phases* (``kernel:boundary`` or a bare boundary) with its colour: a known boundary's, else one of
    :data:`PHASE_OTHERS` not taken yet on this page (cycling only past ten unknown boundaries)."""
    names = list(dict.fromkeys(phases))
    unknown = list(dict.fromkeys(b for b in map(phase_boundary, names) if b not in PHASE_KNOWN))
    other = {b: PHASE_OTHERS[i % len(PHASE_OTHERS)] for i, b in enumerate(unknown)}
    return {p: PHASE_KNOWN.get(phase_boundary(p)) or other[phase_boundary(p)] for p in names}

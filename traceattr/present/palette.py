"""One colour per backend, keyed by its name: the same on every HTML page, in every run, and on the terminal.

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

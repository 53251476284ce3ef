"""traceattr: where does the GPU time of an attention call go?

import traceattr
run = traceattr.open("run.sqlite")        # cheap: nothing read yet
att = run.attribute(mode="innermost")     # polars frames: att.ranges, att.ops
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traceattr.session import Session, open

__all__ = ["Session", "__version__", "open"]


def __getattr__(name: str) -> Any:
    # imported on first use, so `traceattr` on the command line can take over Ctrl-C before polars loads
    if name in ("Session", "open"):
        from traceattr import session

        return getattr(session, name)
    raise AttributeError(f"module 'traceattr' has no attribute {name!r}")

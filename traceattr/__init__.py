"""traceattr: where does the GPU time of an attention call go?

import traceattr
run = traceattr.open("run.sqlite")        # cheap: nothing read yet
att = run.attribute(mode="innermost")     # polars frames: att.ranges, att.ops
"""

from __future__ import annotations

__version__ = "0.1.0"

from traceattr.session import Session, open

__all__ = ["Session", "__version__", "open"]

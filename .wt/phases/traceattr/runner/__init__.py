"""The GPU side of ``traceattr profile``: the process Nsight Systems runs (``python -m traceattr.runner``)."""

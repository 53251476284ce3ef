"""What a call's time is (``--time``): the bases a verdict, rule, fit and roofline can read.

Its own module, free of numpy and polars, because every command's options name it at import time."""

from __future__ import annotations

# basis -> the call table's column it reads, and the words that say so
BASES: dict[str, tuple[str, str]] = {
    "span": ("gpu_span_ns", "GPU span per call (first op start to last op end)"),
    "work": ("work_span_ns", "GPU span per call of its ops other than flush-role ones"),
    "attention": ("attention_span_ns", "GPU span per call of its attention and reduce kernels"),
    "events": (
        "event_ns",
        "CUDA-event time per call (start event to stop event: the runner's, or the trace's own "
        "cudaEventRecord pairs inside each call)",
    ),
}

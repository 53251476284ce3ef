"""Running a command over many traces: progress, failures, one combined result (shared by attribute and compare)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from traceattr.core.errors import TraceattrError
from traceattr.jobs.many import Combined, Settings, combine, parts_folder, run_traces


@contextlib.contextmanager
def attribute_many(
    paths: list[Path], settings: Settings, *, workers: int | None, dask: str | None, out: Path | None
) -> Iterator[Combined]:
    """Attribute *paths*, counted on stderr (:mod:`traceattr.present.steps`); yields the combined result while the workers' per-op parts exist.

    Each failed trace is printed as one line; when none could be read the
    command ends with an error (exit 2).
    """
    from traceattr.present.steps import steps  # on stderr, a terminal only, after a second

    with parts_folder(out) if out is not None else contextlib.nullcontext() as parts:
        with steps() as step:
            advance = step.counted(f"attribute {len(paths):,} traces", len(paths))
            results = run_traces(paths, settings, workers=workers, dask=dask, parts=parts, on_done=advance)
            step("combine the traces")
            combined = combine(results)
        for reason in combined.failures:
            print(f"traceattr: error: {reason}", file=sys.stderr)
        if len(combined.failures) == len(paths):
            raise TraceattrError(f"none of the {len(paths)} traces could be read")
        yield combined


def exit_status(combined: Combined) -> int:
    """2 when some traces failed (what was written lacks them), else 0."""
    return 2 if combined.failures else 0

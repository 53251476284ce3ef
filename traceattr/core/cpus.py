"""How many CPUs this process may use."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity, which a container or ``taskset`` may set below
    the machine's count (``os.cpu_count()``), so threads and worker processes are not oversubscribed."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1

"""How precisely a median is known: a distribution-free interval, cheap enough to ask after every few calls.

Shared by the GPU runner (its stopping rule: add calls until each arm's median
is this precise) and the analysis (a round's noise per row), so both sides
read one definition without the runner importing the analysis layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where used: every command imports CONFIDENCE (the protocol record),
    import numpy as np  # and numpy's ~10 MB resident would stand under report's attribution peak

CONFIDENCE = 0.95


def median_interval(values: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """A distribution-free interval of the median: two order statistics, ranks from the binomial.

    How many samples fall below the median is Binomial(n, ½) whatever the
    timing distribution (kernel times have long tails), so no shape is
    assumed, and it is cheap enough to ask after every few calls. (NaN, NaN)
    for fewer samples than such an interval needs.
    """
    import numpy as np
    from scipy import (
        stats,  # here, not at the top: compare and report import this module, and scipy.stats takes seconds
    )

    v = np.sort(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    n = len(v)
    lo = int(stats.binom.ppf((1 - confidence) / 2, n, 0.5)) - 1  # 0-based rank of the lower bound
    hi = n - 1 - lo
    if n < 2 or lo < 0 or hi <= lo:
        return math.nan, math.nan
    return float(v[lo]), float(v[hi])


def median_noise(values: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> float:
    """Half the width of :func:`median_interval`, as a fraction of the median (NaN when it has none).

    The runner's ``max_noise`` stops adding calls once every arm's median is
    this precise (nvbench stops on noise the same way).
    """
    import numpy as np

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]  # the same samples as the interval's
    low, high = median_interval(v, confidence)
    median = float(np.median(v)) if len(v) else math.nan
    return (high - low) / 2 / median if median > 0 else math.nan

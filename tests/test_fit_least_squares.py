"""``analysis.fit``'s least squares (numpy, so that ``compare`` need not import scipy.stats) against scipy's."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from traceattr.analysis.fit import _least_squares


@pytest.mark.parametrize("n", [3, 5, 40, 2000])
def test_least_squares_equals_linregress(n: int) -> None:
    rng = np.random.default_rng(n)
    x = np.repeat(np.array([8e3, 32e3, 131e3, 262e3])[: max(3, min(n, 4))], -(-n // 4))[:n].astype(float)
    x[: len(np.unique(x))] = np.unique(x)  # every context at least once
    y = 12 + 3e-4 * x + rng.normal(0, 0.5, n)
    a, b, sa, sb, r = _least_squares(x, y)
    ref = stats.linregress(x, y)
    assert (a, b, sa, sb, r) == pytest.approx(
        (ref.intercept, ref.slope, ref.intercept_stderr, ref.stderr, ref.rvalue), rel=1e-9
    )
    assert special.stdtrit(n - 2 if n > 2 else 1, 0.975) == pytest.approx(stats.t.ppf(0.975, max(n - 2, 1)))


def test_a_flat_line_is_fitted_as_scipy_fits_it() -> None:
    x, y = np.array([1.0, 2.0, 3.0]), np.full(3, 5.0)
    ref = stats.linregress(x, y)
    assert np.allclose(_least_squares(x, y), (ref.intercept, ref.slope, ref.intercept_stderr, ref.stderr, ref.rvalue),
                       equal_nan=True)  # fmt: skip

"""Fixed cost vs per-token cost (analysis.fit), and compare showing it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import special, stats

from traceattr.analysis.fit import _least_squares, fit
from traceattr.cli import main

EXAMPLE = Path(__file__).parent.parent / "examples" / "traces" / "h200_mla_sweep.sqlite"


def _calls(
    backend: str, q: int, a_us: float, b_us_per_1k: float, contexts: list[int], noise: float = 0.0
) -> pl.DataFrame:
    rng = np.random.default_rng(q)
    rows = []
    for ctx in contexts:
        for _ in range(10):
            t = (a_us + b_us_per_1k * ctx / 1000) * (1 + noise * rng.standard_normal())
            rows.append((backend, f"q{q}_ctx{ctx}", t * 1000))
    return pl.DataFrame(
        rows, schema={"backend": pl.String, "shape": pl.String, "gpu_span_ns": pl.Float64}, orient="row"
    )


def test_recovers_fixed_and_per_token_cost_per_backend_and_q() -> None:
    ctx = [8000, 32000, 131000, 512000]
    calls = pl.concat([
        _calls("fa3", 8, 25.0, 0.45, ctx, noise=0.01), _calls("flashmla", 8, 36.0, 0.39, ctx, noise=0.01),
        _calls("fa3", 1, 12.0, 0.40, ctx), _calls("fa2", 1, 9.0, 1.0, ctx[:2]),  # two contexts: no fit
    ])  # fmt: skip
    got = {(r["family"], r["backend"]): r for r in fit(calls).iter_rows(named=True)}
    assert set(got) == {("q8_ctx*", "fa3"), ("q8_ctx*", "flashmla"), ("q1_ctx*", "fa3")}
    exact = got[("q1_ctx*", "fa3")]
    assert exact["fixed_us"] == pytest.approx(12.0) and exact["per_1k_tokens_us"] == pytest.approx(0.40)
    assert exact["r2"] == pytest.approx(1.0) and exact["ctx_half"] == pytest.approx(30_000)
    for key, (a, b) in {("q8_ctx*", "fa3"): (25.0, 0.45), ("q8_ctx*", "flashmla"): (36.0, 0.39)}.items():
        r = got[key]
        assert r["fixed_low_us"] < a < r["fixed_high_us"] and r["per_1k_low_us"] < b < r["per_1k_high_us"]
        assert r["fixed_high_us"] - r["fixed_low_us"] > 0 and r["calls"] == 40 and r["contexts"] == 4


def test_compare_prints_and_writes_the_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(EXAMPLE), "--out", str(tmp_path)])
    assert exit_info.value.code in (0, None)
    assert "Fixed vs per-token cost" in capsys.readouterr().out
    written = pl.read_csv(tmp_path / "fit.csv")
    fa3 = written.filter(pl.col("backend") == "fa3").row(0, named=True)
    # the sweep (8k … 900k ctx at q8): fa3 reads KV at ~0.45 µs per 1k tokens on top of ~26 µs
    assert fa3["contexts"] == 5 and 20 < fa3["fixed_us"] < 35 and 0.4 < fa3["per_1k_tokens_us"] < 0.5
    assert {"calls.csv", "summary.csv", "crossovers.csv", "fit.csv"} <= {p.name for p in tmp_path.iterdir()}


# -- ``analysis.fit``'s least squares (numpy, so that ``compare`` need not import scipy.stats) against scipy's.
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


def test_a_flat_line_has_no_correlation_and_no_errors() -> None:
    # scipy changed its mind here (1.15 says r = 0 and zero errors, 1.17 NaN); ours is 1.17's, whatever is installed:
    # a flat y has no spread to correlate with, so r and both standard errors are NaN, the line itself exact
    a, b, sa, sb, r = _least_squares(np.array([1.0, 2.0, 3.0]), np.full(3, 5.0))
    assert (a, b) == (5.0, 0.0) and all(np.isnan(v) for v in (sa, sb, r))

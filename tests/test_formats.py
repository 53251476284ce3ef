"""traceattr.present.formats: the number formats every surface prints."""

from __future__ import annotations

import math

from traceattr.present import formats as f


def test_number_formats() -> None:
    assert (f.us(1234.56), f.us(1234.567, 2), f.us_from_ns(1_234_560), f.us(None)) == (
        "1,234.6",
        "1,234.57",
        "1,234.6",
        "",
    )
    assert (f.ms(1234.5), f.signed_ms(-0.5), f.count(12345), f.signed_count(3)) == ("1,234.50", "-0.50", "12,345", "+3")
    assert (f.counted(1, "shape"), f.counted(0, "shape"), f.counted(12345, "call"), f.counted(None, "call")) == (
        "1 shape", "0 shapes", "12,345 calls", "",
    )  # fmt: skip
    assert (f.counted(1, "index", "indices"), f.counted(2, "index", "indices")) == ("1 index", "2 indices")
    assert (f.pct(0.256), f.pct(0.256, 0), f.signed_pct(-0.031), f.signed_pct(0.05, 0)) == (
        "25.6%",
        "26%",
        "-3.1%",
        "+5%",
    )
    assert (f.times(1.234), f.decimals(0.98765, 3), f.interval(0.98, 1.0123), f.interval(None, 1.0)) == (
        "1.23×", "0.988", "0.980–1.012", "",
    )  # fmt: skip
    assert f.with_interval(12.34, 11.9, 12.81, f.us) == "12.3 [11.9, 12.8]"
    assert (f.size(1.5e9), f.size(256 << 20), f.size(12), f.size(2_500_000, 1)) == (
        "1.50 GB",
        "268.44 MB",
        "12 B",
        "2.5 MB",
    )
    assert (f.bandwidth(4.8e12), f.gigabytes(141e9)) == ("4.80 TB/s", "141 GB")
    assert (f.tie_text(0.84), f.tie_text(math.inf), f.tie_text(None)) == (
        "tie within noise (±0.8%)", "tie (too few calls to tell)", "tie (too few calls to tell)",
    )  # fmt: skip

"""traceattr.core.jsonable: values made JSON-safe."""

from __future__ import annotations

import math

from traceattr.core.jsonable import finite


def test_finite_is_json_safe() -> None:
    assert [finite(v) for v in (1.5, 3, math.nan, math.inf, -math.inf, None)] == [1.5, 3, None, None, None, None]

"""Values JSON can hold: JSON has no NaN or infinity, so an undefined number is written as null."""

from __future__ import annotations

import math


def finite(value: float | None) -> float | None:
    """*value* unchanged when it is a finite number, else None (NaN, ±inf and None all read "not defined")."""
    return None if value is None or not math.isfinite(value) else value

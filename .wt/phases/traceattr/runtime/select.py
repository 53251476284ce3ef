"""Which number of a batch the table is keyed on, and the arm it picks: pure Python on host data.

A table row was measured on a batch of *batch* requests of one ctx each, so for a uniform batch
every rule gives that ctx. For a ragged batch the rules differ:

* ``max`` (the default): the longest request's ctx. A split-KV kernel's time is set by its
  largest share of work once the scheduler has spread the KV over the SMs; ``max`` is what
  ``seq_lens`` a uniform batch of that size would need to cover every request.
* ``mean``: the average ctx, i.e. the total KV read divided by the batch: the bandwidth view
  (the kernels here are HBM-bound at q·H ≤ 128), right when the scheduler balances perfectly.

Which of the two predicts the faster arm on ragged batches is a measurement (docs/decode.md says what
was measured); the per-request split (two arms on two sub-batches) is not built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

Rule = Literal["max", "mean"]
RULES: tuple[Rule, ...] = ("max", "mean")


def key_ctx(seq_lens: Sequence[int], rule: Rule = "max") -> int:
    """The ctx a batch is looked up at under *rule*; ``ValueError`` on an empty batch or an unknown rule."""
    if not seq_lens:
        raise ValueError("an empty batch has no ctx to dispatch on")
    if rule == "max":
        return max(seq_lens)
    if rule == "mean":
        return -(-sum(seq_lens) // len(seq_lens))  # ceiling: a batch of one ctx keys on that ctx exactly
    raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")

"""Dispatchers built on the GPU: the table's arms captured for one batch size over shared static inputs."""

from __future__ import annotations

from collections.abc import Sequence

from traceattr.runtime.dispatcher import Dispatcher
from traceattr.runtime.graphs import Footprint, StaticInputs, build_arm
from traceattr.runtime.select import Rule
from traceattr.runtime.table import FamilyTable, Segment


def fixed_table(table: FamilyTable, arm: str) -> FamilyTable:
    """*table*'s key with one segment: "always *arm*" (a fixed arm is a dispatcher with nothing to choose)."""
    return FamilyTable(f"always {arm}", table.key, (Segment(None, None, arm),), table.measured_ctx)


def build_dispatcher(table: FamilyTable, inputs: StaticInputs, capture_lens: Sequence[int], *,
                     rule: Rule = "max", record: bool = True) -> tuple[Dispatcher, dict[str, Footprint]]:  # fmt: skip
    """Capture one graph per arm *table* can pick (at *capture_lens*), and the dispatcher over them."""
    arms = {label: build_arm(label, inputs, capture_lens) for label in table.arms}
    return Dispatcher(table, arms, rule=rule, record=record), {label: arm.footprint for label, arm in arms.items()}

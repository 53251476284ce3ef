"""On a CUDA GPU: the instrumented split-KV kernel (examples/split_mla) against the torch reference.

Both merges, stamped and plain, on rows that reach each code path (pages of a tile or
smaller, causal verify rows, several requests, a split count given, a short last tile):
the output within the runner's bf16 tolerance, the stamped build bitwise equal to the
plain one, every CTA's stamps written and in order, and the in-kernel merge's counters
back at zero (a replayed CUDA graph finds them so). Skipped without a GPU, Triton or
the example package (``pip install -e examples/split_mla``).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
pytest.importorskip("triton")
backend = pytest.importorskip("split_mla.backend")

from traceattr.backends.base import SM_SCALE  # noqa: E402
from traceattr.backends.inputs import build_inputs  # noqa: E402
from traceattr.backends.reference import mla_reference, relative_error  # noqa: E402
from traceattr.core.shapes import parse_shape  # noqa: E402

TOLERANCE = 0.02  # the runner's bf16 tolerance
ROWS = [
    ("q1_ctx8k", {}),
    ("q8_ctx4100_b2", {}),  # causal verify rows, two requests, a short last tile
    ("q1_ctx3000_p16", {}),  # pages smaller than a tile: per-token page lookup
    ("q2_ctx2000", {"splits": 5}),
    ("q1_ctx2000", {"stages": 2}),  # two tiles in flight, not four (block_n above 32 is refused)
    ("q8_ctx4100_b2", {"peel": 2}),  # two tiles loaded before the loop; a split's last tile short
    ("q1_ctx3000_p16", {"peel": 2}),
    ("q1_ctx8k", {"peel": 1}),  # the first tile peeled out, with its stamps
    ("q2_ctx2000", {"peel": 1, "splits": 5}),
]


@pytest.mark.parametrize(("row", "options"), ROWS)
@pytest.mark.parametrize("merge", ["reduce", "inkernel"])
def test_split_mla_matches_reference_stamped_and_plain(row: str, options: dict[str, int], merge: str) -> None:
    shape = parse_shape(row)
    inputs = build_inputs(shape, shuffle=True, seed=5)
    ref = mla_reference(inputs, inputs.layout.requests(), SM_SCALE)
    stamped = backend.SplitMLA(merge=merge, **options).prepare(shape, inputs)
    plain = backend.SplitMLA(merge=merge, plain=True, **options).prepare(shape, inputs)
    for call in (stamped, plain):
        call.out.fill_(float("nan"))  # an unwritten output element fails
    out = stamped.output_rows(stamped.run()).clone()
    out_plain = plain.output_rows(plain.run()).clone()
    torch.cuda.synchronize()
    assert relative_error(out, ref) <= TOLERANCE
    assert torch.equal(out, out_plain), "stamps changed the output"

    stamps = stamped.stamp_buffer.cpu()
    rows = sum(k["rows"] for k in stamped.stamp_header["kernels"])
    row0 = 0
    for kernel in stamped.stamp_header["kernels"]:
        block = stamps[row0 : row0 + kernel["rows"], : len(kernel["boundaries"])]
        assert bool((block > 0).all()), f"{kernel['kernel']}: a CTA wrote no stamp"
        assert bool((block[:, 1:] >= block[:, :-1]).all()), f"{kernel['kernel']}: stamps out of order"
        row0 += kernel["rows"]
    assert row0 == rows <= stamps.shape[0]
    assert int(stamped.counter.abs().sum()) == 0 and int(plain.counter.abs().sum()) == 0

    again = plain.output_rows(plain.run())
    assert torch.equal(again, out_plain), "a second call differs (counters left over?)"


def test_floor_probes_run_plain_and_leave_the_output_alone() -> None:
    shape = parse_shape("q1_ctx8k")
    inputs = build_inputs(shape, seed=2)
    call = backend.SplitMLA(merge="reduce").prepare(shape, inputs)
    call.run()
    call.stamp_buffer.zero_()
    for probe in call.floor_probes.values():
        probe()
    torch.cuda.synchronize()
    assert call.stamps, "a probe left the call unstamped"
    assert int(call.stamp_buffer.abs().sum()) == 0, "a floor probe wrote stamps"

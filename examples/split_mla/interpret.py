"""On the CPU: split-mla's kernels under Triton's interpreter, against the torch reference.

    TRITON_INTERPRET=1 python examples/split_mla/interpret.py ROW[:opt=v,...] ...

Checks the kernels' logic (geometry, page lookups, causal rows, both merges, the
in-kernel counters) where there is no GPU; it times nothing and compiles nothing
(stamps need inline PTX, so the plain build runs). The interpreter multiplies bf16
operands as raw 16-bit integers, so it runs on fp32 copies of the same inputs; and
Triton 3.6's interpreter turns its 1-element scalars into ints in a way numpy 2
refuses, patched below. Exit 1 when a row is wrong (relative error over 0.02).
"""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np

if os.environ.get("TRITON_INTERPRET") != "1":
    sys.exit("set TRITON_INTERPRET=1 (before Triton is imported)")

import triton.runtime.interpreter as interpreter
from split_mla.backend import SplitMLA

from traceattr.backends.base import SM_SCALE
from traceattr.backends.inputs import build_inputs
from traceattr.backends.reference import mla_reference, relative_error
from traceattr.core.shapes import parse_shape

_patch_tensor = interpreter._patch_lang_tensor


def _patched(tensor, scope):  # type: ignore[no-untyped-def]
    _patch_tensor(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))


interpreter._patch_lang_tensor = _patched


def main() -> int:
    ok = True
    for arg in sys.argv[1:]:
        name, _, opts = arg.partition(":")
        options = {k: int(v) for k, v in (x.split("=") for x in opts.split(","))} if opts else {}
        shape = parse_shape(name)
        inputs = build_inputs(shape, device="cpu", shuffle=True, seed=5)
        ref = mla_reference(inputs, inputs.layout.requests(), SM_SCALE)
        fp32 = dataclasses.replace(inputs, q=inputs.q.float(), kv=inputs.kv.float())
        for merge in ("reduce", "inkernel"):
            call = SplitMLA(merge=merge, plain=True, **options).prepare(shape, fp32)
            call.out = call.out.float().fill_(float("nan"))  # an unwritten element fails
            err = relative_error(call.output_rows(call.run()), ref)
            left = int(call.counter.abs().sum())
            good = err <= 0.02 and left == 0
            ok = ok and good
            print(f"{arg} merge={merge}: {call.splits} splits × {call.chunk} tokens, relative error {err:.3g}, "
                  f"counters left {left}: {'OK' if good else 'WRONG'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

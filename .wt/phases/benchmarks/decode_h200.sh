#!/usr/bin/env bash
# The H200 runs behind examples/decode/: GPU tests of traceattr.runtime, the trajectories, and a short
# trajectory under nsys (an NVTX range per timed call) to check the CUDA-event figures against the trace.
# Usage (on the device, after `source .device/setup.sh` and `pip install -e .`):
#   PARTS="tests q8 q1 levers mix" bash benchmarks/decode_h200.sh OUT_DIR      (the default PARTS)
#   PARTS="mix_narrow nsys" bash benchmarks/decode_h200.sh OUT_DIR             (the second call)
#   PARTS="mixq" bash benchmarks/decode_h200.sh OUT_DIR                        (the fourth)
# Receipts land in OUT_DIR/receipts/ and are packed into receipts.tar.gz (the device returns at most 8 files).
set -u
OUT="${1:?output folder}"
R="$OUT/receipts"
mkdir -p "$R"
TABLE=examples/sweeps/h200_27shapes_graphs_dispatch.json
PARTS=" ${PARTS:-tests q8 q1 levers mix} "
has() { [[ "$PARTS" == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv
python3 -c "import torch, flashinfer, flash_mla; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
if has tests; then
  # --noconftest: tests/conftest.py loads the trace fixtures (polars), which this machine does not carry
  python3 -m pytest --noconftest -p no:cacheprovider -q -rA tests/test_runtime_gpu.py 2>&1 | tee "$OUT/pytest_gpu.txt"
fi
# q8: the H200 --graphs table (27-shape profile run) against fixed fa3 and flashmla
has q8 && python3 -m traceattr decode --q 8 -a fa3 -a flashmla --table "$TABLE" --table-mode graphs \
  --from 8192 --to 900000 --steps 40 --rounds 10 --name q8_grow -o "$R"
# q1: fa3 against fa3[splits=4], the table derived from a 10-point grid in the same run
has q1 && python3 -m traceattr decode --q 1 -a fa3 -a 'fa3[splits=4]' \
  --from 8192 --to 900000 --steps 40 --rounds 10 --grid 10 --name q1_grow -o "$R"
# q1 with every split count: the grid's table meets the levers' cliffs along ctx
has levers && python3 -m traceattr decode --q 1 -a fa3 -a 'fa3[splits=2]' -a 'fa3[splits=4]' -a 'fa3[splits=8]' \
  --from 8192 --to 900000 --steps 40 --rounds 10 --grid 10 --name q1_levers -o "$R"
# ragged batches (4 requests, ctx log-uniform each): which rule, max or mean, should key the table
has mix && python3 -m traceattr decode --q 8 --batch 4 -a fa3 -a flashmla --trajectory mix --rule max --rule mean \
  --from 8192 --to 900000 --steps 40 --rounds 10 --grid 10 --name q8_b4_mix -o "$R"
# the same around the b4 breakpoint (~54k), where the two rules disagree on many batches
has mix_narrow && python3 -m traceattr decode --q 8 --batch 4 -a fa3 -a flashmla --trajectory mix --rule max --rule mean \
  --from 16384 --to 200000 --steps 60 --rounds 10 --grid 10 --name q8_b4_mix_narrow -o "$R"
# steps of q 1, 4 or 8 (equal weights), ctx log-uniform: each q its own graphs, the table's family per q
has mixq && python3 -m traceattr decode --trajectory mixq --mix-q 1 --mix-q 4 --mix-q 8 -a fa3 -a flashmla \
  --table "$TABLE" --table-mode graphs --from 8192 --to 900000 --steps 60 --rounds 10 --name mixq_1_4_8 -o "$R"
if has nsys && command -v nsys >/dev/null; then
  # as traceattr's own capture (jobs/capture.py): no CPU sampling, the range the trajectory opens with
  # cudaProfilerStart/Stop, every graph node traced
  nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node \
    --capture-range=cudaProfilerApi --capture-range-end=stop --force-overwrite=true --output=/tmp/q8_nsys \
    python3 -m traceattr decode --q 8 -a fa3 -a flashmla --table "$TABLE" --table-mode graphs \
      --steps 8 --rounds 3 --no-verify --name q8_nsys -o "$R" \
  && nsys export --type sqlite --force-overwrite true -o "$OUT/q8_nsys.sqlite" /tmp/q8_nsys.nsys-rep >/dev/null
fi
tar -czf "$OUT/receipts.tar.gz" -C "$OUT" receipts && rm -rf "$R" && ls -la "$OUT"

#!/usr/bin/env bash
# The H200 run behind examples/decode/: GPU tests of traceattr.runtime, the trajectories, and a short
# trajectory under nsys (an NVTX range per timed call) to check the CUDA-event figures against the trace.
# Usage (on the device, after `source .device/setup.sh` and `pip install -e .`): bash benchmarks/decode_h200.sh OUT_DIR
# Receipts land in OUT_DIR/receipts/ and are packed into receipts.tar.gz (the device returns at most 8 files).
set -u
OUT="${1:?output folder}"
R="$OUT/receipts"
mkdir -p "$R"
TABLE=examples/sweeps/h200_27shapes_graphs_dispatch.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv
python3 -c "import torch, flashinfer, flash_mla; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
if [ "${TESTS:-1}" = 1 ]; then
  # --noconftest: tests/conftest.py loads the trace fixtures (polars), which this machine does not carry
  python3 -m pytest --noconftest -p no:cacheprovider -q -rA tests/test_runtime_gpu.py 2>&1 | tee "$OUT/pytest_gpu.txt"
fi
# q8: the H200 --graphs table (27-shape profile run) against fixed fa3 and flashmla
python3 -m traceattr decode --q 8 -a fa3 -a flashmla --table "$TABLE" --table-mode graphs \
  --from 8192 --to 900000 --steps 40 --rounds 10 --name q8_grow -o "$R"
# q1: fa3 against fa3[splits=4], the table derived from a 10-point grid in the same run
python3 -m traceattr decode --q 1 -a fa3 -a 'fa3[splits=4]' \
  --from 8192 --to 900000 --steps 40 --rounds 10 --grid 10 --name q1_grow -o "$R"
# q1 with every split count: the grid's table meets the levers' cliffs along ctx
python3 -m traceattr decode --q 1 -a fa3 -a 'fa3[splits=2]' -a 'fa3[splits=4]' -a 'fa3[splits=8]' \
  --from 8192 --to 900000 --steps 40 --rounds 10 --grid 10 --name q1_levers -o "$R"
# ragged batches (4 requests, ctx log-uniform each): which rule, max or mean, should key the table
python3 -m traceattr decode --q 8 --batch 4 -a fa3 -a flashmla --trajectory mix --rule max --rule mean \
  --from 8192 --to 900000 --steps 40 --rounds 10 --grid 10 --name q8_b4_mix -o "$R"
if [ "${NSYS:-1}" = 1 ] && command -v nsys >/dev/null; then
  nsys profile -t cuda,nvtx --cuda-graph-trace=node -o /tmp/q8_nsys --force-overwrite true \
    python3 -m traceattr decode --q 8 -a fa3 -a flashmla --table "$TABLE" --table-mode graphs \
      --steps 8 --rounds 3 --no-verify --name q8_nsys -o "$R" \
  && nsys export --type sqlite -o "$OUT/q8_nsys.sqlite" --force-overwrite true /tmp/q8_nsys.nsys-rep
fi
tar -czf "$OUT/receipts.tar.gz" -C "$OUT" receipts && rm -rf "$R" && ls -la "$OUT"

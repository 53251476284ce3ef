#!/usr/bin/env bash
# The H200 run behind examples/decode/: GPU tests of traceattr.runtime, the two trajectories, and a short
# trajectory under nsys (NVTX ranges per timed call) to check the CUDA-event figures against the trace.
# Usage (on the device, after `source .device/setup.sh` and `pip install -e .`): bash benchmarks/decode_h200.sh OUT_DIR
set -u
OUT="${1:?output folder}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv
python3 -c "import torch, flashinfer, flash_mla; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
if [ "${TESTS:-1}" = 1 ]; then
  # --noconftest: tests/conftest.py loads the trace fixtures (polars), which this machine does not carry
  python3 -m pytest --noconftest -p no:cacheprovider -q -rA tests/test_runtime_gpu.py 2>&1 | tee "$OUT/pytest_gpu.txt"
fi
python3 -m traceattr decode --q 8 -a fa3 -a flashmla \
  --table examples/sweeps/h200_27shapes_graphs_dispatch.json --table-mode graphs \
  --from 8192 --to 900000 --steps "${STEPS:-40}" --rounds "${ROUNDS:-10}" --name q8_grow -o "$OUT"
python3 -m traceattr decode --q 1 -a fa3 -a 'fa3[splits=2]' -a 'fa3[splits=4]' -a 'fa3[splits=8]' \
  --from 8192 --to 900000 --steps "${STEPS:-40}" --rounds "${ROUNDS:-10}" --grid 10 --name q1_grow -o "$OUT"
if [ "${NSYS:-1}" = 1 ] && command -v nsys >/dev/null; then
  nsys profile -q -t cuda,nvtx --cuda-graph-trace=node -o /tmp/q8_nsys -f true \
    python3 -m traceattr decode --q 8 -a fa3 -a flashmla \
      --table examples/sweeps/h200_27shapes_graphs_dispatch.json --table-mode graphs \
      --steps 8 --rounds 3 --no-verify --name q8_nsys -o "$OUT" \
  && nsys export -q --type sqlite -o "$OUT/q8_nsys.sqlite" -f true /tmp/q8_nsys.nsys-rep && ls -la "$OUT"
fi

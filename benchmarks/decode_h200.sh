#!/usr/bin/env bash
# The H200 run behind examples/decode/: GPU tests of traceattr.runtime, then the two trajectories.
# Usage (on the device, after `source .device/setup.sh` and `pip install -e .`): bash benchmarks/decode_h200.sh OUT_DIR
set -u
OUT="${1:?output folder}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv
python3 -c "import torch, flashinfer, flash_mla; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
# --noconftest: tests/conftest.py loads the trace fixtures (polars), which this machine does not carry
python3 -m pytest --noconftest -p no:cacheprovider -q -rA tests/test_runtime_gpu.py 2>&1 | tee "$OUT/pytest_gpu.txt"
python3 -m traceattr decode --q 8 -a fa3 -a flashmla \
  --table examples/sweeps/h200_27shapes_graphs_dispatch.json --table-mode graphs \
  --from 8192 --to 900000 --steps "${STEPS:-40}" --rounds "${ROUNDS:-10}" --name q8_grow -o "$OUT"
python3 -m traceattr decode --q 1 -a fa3 -a 'fa3[splits=4]' \
  --from 8192 --to 900000 --steps "${STEPS:-40}" --rounds "${ROUNDS:-10}" --grid 10 --name q1_grow -o "$OUT"

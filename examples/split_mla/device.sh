# The H200 run of docs/phases.md: versions, check.py, then the round; results into $OUT.
set -x
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" || exit 3
source .device/setup.sh && cd .wt/phases || exit 3
python3 -m pip install -q --no-deps --no-build-isolation -e . -e examples/split_mla || exit 3
timeout "${CHECK_S:-150}" python3 examples/split_mla/check.py "$OUT/check.json" ${CHECK_ROWS:-q1_ctx8k q8_ctx32k q1_ctx131k} || exit 1
timeout "${ROUND_S:-330}" traceattr round --rows examples/split_mla/rows.txt --baseline 'split-mla[merge=reduce]' \
  --candidate 'split-mla[merge=inkernel]' --max-iters "${MAX_ITERS:-200}" --out-root /tmp/rr 2>&1 | tail -40
cd /tmp/rr && tar -cJf "$OUT/round.tar.xz" --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='report.html' . ; ls -la "$OUT"

# The GPU run of docs/phases.md, from the repository root of the device's copy, results into $OUT:
#   STEP=bench  bash examples/split_mla/device.sh   versions, the GPU tests, bench.py's configurations;
#                                                   writes the options the rounds use to /tmp/split_mla.opts
#   STEP=rounds bash examples/split_mla/device.sh   stamp overhead (plain vs stamped, each merge), the merge
#                                                   round, and a small round to ship; OPTS= or the bench's pick
#   bash examples/split_mla/device.sh               both, in one call
# WT: where this worktree's copy is (a helper's .wt/NAME); bench_old/ beside it may hold split_mla_old.
set -o pipefail
source .device/setup.sh && cd "${WT:-.}" || exit 3
python3 -m pip install -q --no-deps --no-build-isolation -e . -e examples/split_mla >/dev/null 2>&1 || exit 3
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache PYTHONPATH="$PWD/bench_old:$PYTHONPATH" COLUMNS=160
log() { tee -a "$OUT/log"; }
T0=$(date +%s)
if [ "${STEP:-bench}" = bench ]; then
  (date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
   python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)") 2>&1 | log
  S="q1_ctx8k:old q1_ctx8k q1_ctx8k:block_n=32,stages=4 q1_ctx8k:splits=64 q1_ctx8k:splits=128 q1_ctx131k
     q1_ctx131k:block_n=32,stages=4"
  timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_split_mla_gpu.py >/tmp/tests.log 2>&1 &
  for s in $S; do timeout 100 python3 examples/split_mla/bench.py --warm "$s" >"/tmp/warm.$s.log" 2>&1 & done; wait
  echo "compiled and tested in $(( $(date +%s) - T0 )) s" | log; grep -l -i "error" /tmp/warm.*.log | log
  tail -6 /tmp/tests.log | log
  # shellcheck disable=SC2086
  timeout 90 python3 examples/split_mla/bench.py "$OUT/bench.json" $S 2>&1 | log
  python3 examples/split_mla/bench.py --pick "$OUT/bench.json" | tee /tmp/split_mla.opts | sed 's/^/options: /' | log
fi
if [ "${STEP:-rounds}" = rounds ]; then
  OPTS="${OPTS-$(cat /tmp/split_mla.opts 2>/dev/null)}"
  echo "options: '$OPTS'" | log
  for m in reduce inkernel; do
    timeout "${OVERHEAD_S:-60}" traceattr round --rows examples/split_mla/overhead_rows.txt \
      --baseline "split-mla[merge=$m,plain$OPTS]" --candidate "split-mla[merge=$m$OPTS]" --captures 2 \
      --max-iters "${OVERHEAD_ITERS:-40}" --out-root /tmp/oh 2>&1 | grep -A8 '^| row' | log
  done
  echo "overhead done at $(( $(date +%s) - T0 )) s" | log
  timeout "${ROUND_S:-110}" traceattr round --rows examples/split_mla/rows.txt \
    --baseline "split-mla[merge=reduce$OPTS]" --candidate "split-mla[merge=inkernel$OPTS]" --captures 2 \
    --max-iters "${ROUND_ITERS:-60}" --out-root /tmp/rr 2>&1 | grep -A12 '^| row' | log
  echo "round done at $(( $(date +%s) - T0 )) s" | log
  for r in /tmp/rr/*/ /tmp/oh/*/; do
    timeout 25 python3 -m traceattr.cli.phases "$r" >"$OUT/phases_$(basename "$r").md" 2>&1
  done
  for c in /tmp/rr/*/capture-1; do timeout 20 python3 -m traceattr.cli.phases "$c" 2>&1 | tail -14 | log; done
  printf 'q1_ctx8k\n' >/tmp/ship_rows.txt
  (cd /tmp && tar -cJf "$OUT/rounds.tar.xz" --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='report.html' \
    --exclude='stamps' rr oh)
  timeout 45 traceattr round --rows /tmp/ship_rows.txt --baseline "split-mla[merge=reduce$OPTS]" \
    --candidate "split-mla[merge=inkernel$OPTS]" --captures 2 --iters 3 --max-noise 0 --out-root /tmp/ship 2>&1 | tail -3 | log
  (cd /tmp/ship && tar -cJf "$OUT/ship.tar.xz" --exclude='*.nsys-rep' --exclude='report.html' .)
  echo "all done at $(( $(date +%s) - T0 )) s" | log; ls -la "$OUT" | log
fi

# The GPU run of docs/phases.md, from the repository root of the device's copy; results into $OUT.
#   WT=.wt/NAME bash .wt/NAME/examples/split_mla/device.sh
# Compiles every kernel the run needs (several processes at once) beside the GPU tests, then: the stamp
# overhead as rounds (plain vs stamped, each merge), the merge round (reduce kernel vs in-kernel merge),
# its phase receipts, a one-row round to ship, and bench.py (this kernel against the last one,
# split_mla_old from bench_old/ when present, and other tile shapes). Most important first: a step
# cut short by the lease leaves the ones before it whole. OPTS=",k=v": options for every arm; PICK_ROWS="ROW[:k=v] ...":
# bench.py on those first, and its --pick added to OPTS.
set -o pipefail
source .device/setup.sh && cd "${WT:-.}" || exit 3
python3 -m pip install -q --no-deps --no-build-isolation -e . -e examples/split_mla >/dev/null 2>&1 || exit 3
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache PYTHONPATH="$PWD/bench_old:$PYTHONPATH" COLUMNS=160
OPTS="${OPTS:-}"
log() { tee -a "$OUT/log"; }
receipt_rows() {  # a round's receipt table into the log (the terminal's tables are boxes), else its output's tail
  local r; r=$(grep -o 'receipts: [^ ]*receipt\.md' "$1" | tail -1 | cut -d' ' -f2)
  if [ -n "$r" ] && [ -f "$r" ]; then grep -h '^|' "$r" | log; else tail -3 "$1" | log; fi
}
T0=$(date +%s)
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
 python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)") 2>&1 | log
B="${WARM_ROWS:-q1_ctx8k q1_ctx8k:min_chunk=512 q1_ctx8k:stages=2 q1_ctx131k q1_ctx131k:stages=2}"  # add ROW:old for bench_old/
timeout "${WARM_S:-100}" python3 -m pytest -q -n 4 -m gpu -p no:cacheprovider tests/test_split_mla_gpu.py >/tmp/tests.log 2>&1 &
for s in $B ${PICK_ROWS:-} q1_ctx32k q8_ctx8k q8_ctx32k q8_ctx131k; do
  timeout "${WARM_S:-100}" python3 examples/split_mla/bench.py --warm "$s" >"/tmp/warm.$s.log" 2>&1 &
done
wait
echo "compiled and tested at $(( $(date +%s) - T0 )) s" | log; grep -l -i "error" /tmp/warm.*.log | log
tail -4 /tmp/tests.log | log
if [ -n "${PICK_ROWS:-}" ]; then  # bench.py first, and the rounds run with the options it picks
  # shellcheck disable=SC2086
  timeout "${PICK_S:-120}" python3 examples/split_mla/bench.py "$OUT/pick.json" $PICK_ROWS 2>&1 | log
  OPTS="$OPTS$(python3 examples/split_mla/bench.py --pick "$OUT/pick.json")"
  echo "picked at $(( $(date +%s) - T0 )) s: OPTS=$OPTS" | log
fi
for m in ${OVERHEAD_MERGES-reduce inkernel}; do
  timeout "${OVERHEAD_S:-60}" traceattr round --rows examples/split_mla/overhead_rows.txt \
    --baseline "split-mla[merge=$m,plain$OPTS]" --candidate "split-mla[merge=$m$OPTS]" --captures 2 \
    --max-iters "${OVERHEAD_ITERS:-40}" --out-root /tmp/oh >"/tmp/round.oh.$m.log" 2>&1
  receipt_rows "/tmp/round.oh.$m.log"
done
echo "overhead rounds done at $(( $(date +%s) - T0 )) s" | log
timeout "${ROUND_S:-100}" traceattr round --rows examples/split_mla/rows.txt \
  --baseline "split-mla[merge=reduce$OPTS]" --candidate "split-mla[merge=inkernel$OPTS]" --captures 2 \
  --iters "${ROUND_MIN_ITERS:-20}" --max-iters "${ROUND_ITERS:-60}" --out-root /tmp/rr >/tmp/round.rr.log 2>&1
receipt_rows /tmp/round.rr.log
echo "round done at $(( $(date +%s) - T0 )) s" | log
# the rounds' stamps and kernel tables (no traces): their phases can be read again anywhere (PHASES_MD=0: only there)
(cd /tmp && tar -cJf "$OUT/rounds.tar.xz" --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='report.html' rr oh)
if [ "${PHASES_MD:-1}" = 1 ]; then
  for r in /tmp/rr/*/ /tmp/oh/*/; do
    timeout 25 python3 -m traceattr.cli.phases "$r" >"$OUT/phases_$(basename "$r" | tr '=[],' '----').md" 2>&1
  done
fi
printf 'q1_ctx8k\n' >/tmp/ship_rows.txt
timeout "${SHIP_S:-45}" traceattr round --rows /tmp/ship_rows.txt --baseline "split-mla[merge=reduce$OPTS]" \
  --candidate "split-mla[merge=inkernel$OPTS]" --captures 2 --iters 3 --max-noise 0 --out-root /tmp/ship 2>&1 | tail -3 | log
(cd /tmp/ship && tar -cJf "$OUT/ship.tar.xz" --exclude='*.nsys-rep' --exclude='report.html' .)
echo "shipped round done at $(( $(date +%s) - T0 )) s" | log
# shellcheck disable=SC2086
timeout 60 python3 examples/split_mla/bench.py "$OUT/bench.json" ${BENCH-$B} 2>&1 | log
echo "all done at $(( $(date +%s) - T0 )) s" | log

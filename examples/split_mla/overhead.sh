# The stamp overhead as rounds (nsys spans, gates, intervals): plain vs stamped, each merge; into $OUT.
source .device/setup.sh && cd .wt/phases || exit 3
python3 -m pip install -q --no-deps --no-build-isolation -e . -e examples/split_mla || exit 3
for m in reduce inkernel; do
  timeout "${ROUND_S:-110}" traceattr round --rows examples/split_mla/overhead_rows.txt --baseline "split-mla[merge=$m,plain]" \
    --candidate "split-mla[merge=$m]" --max-iters "${MAX_ITERS:-100}" --out-root /tmp/oh 2>&1 | grep -A12 '^| row'
done
cd /tmp/oh && tar -cJf "$OUT/overhead.tar.xz" --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='report.html' --exclude='kernels.parquet' --exclude='ranges.parquet' --exclude='stamps' .

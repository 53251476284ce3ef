#!/bin/bash
# The 1 M-kernel capture of issue 36 for a 2-core run elsewhere (a device run: `run` tool, repository root):
#   bash benchmarks/big_report_device.sh   (STEPS=70000 by default; results into $OUT)
# Captures big_report_workload.py, exports the loader's tables to SQLite (what traceattr and nsys stats'
# nvtx_gpu_proj_trace read), xz's it and splits it into 15 MiB pieces; the .nsys-rep too where both fit in
# 60 MiB. Rejoin: cat big.sqlite.xz.part* > big.sqlite.xz && xz -d big.sqlite.xz (sha256 in the log).
set -o pipefail
source .device/setup.sh || exit 3
log=$OUT/log
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nsys --version; nproc; } 2>&1 | tee $log
W=/tmp/big; rm -rf $W; mkdir -p $W
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
t0=$(date +%s%N)
nsys profile --trace cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite true -o $W/big \
  python3 benchmarks/big_report_workload.py --steps ${STEPS:-70000} 2>&1 | tail -8 | tee -a $log
t1=$(date +%s%N); echo "capture $(ms $t0) ms" | tee -a $log
# the loader's tables (traceattr.trace.schema.LOADER_TABLES): all that traceattr and nsys stats' nvtx_gpu_proj_trace read
TABLES='^StringIds$,^CUPTI_ACTIVITY_KIND_KERNEL$,^CUPTI_ACTIVITY_KIND_MEMCPY$,^CUPTI_ACTIVITY_KIND_MEMSET$,^CUPTI_ACTIVITY_KIND_GRAPH_TRACE$,^CUPTI_ACTIVITY_KIND_RUNTIME$,^NVTX_EVENTS$,^TARGET_INFO_GPU$,^META_DATA_EXPORT$,^EXPORT_META_DATA$,^META_DATA_CAPTURE$'
nsys export --type sqlite --tables "$TABLES" --force-overwrite true --quiet true --output $W/big.sqlite $W/big.nsys-rep 2>&1 | tail -3 | tee -a $log
t2=$(date +%s%N); echo "export sqlite --tables $(ms $t1) ms" | tee -a $log
python3 - <<'PY' 2>&1 | tee -a $log
import sqlite3
c = sqlite3.connect("/tmp/big/big.sqlite")
for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds"):
    print(t, c.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
print("ranges", c.execute("SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71)").fetchone()[0])
PY
xz -T0 -6 -c $W/big.sqlite > $W/big.sqlite.xz
echo "xz $(ms $t2) ms" | tee -a $log
ls -l $W | tee -a $log
split -b 15M -d -a 1 $W/big.sqlite.xz $OUT/big.sqlite.xz.part
sha256sum $W/big.sqlite.xz $W/big.sqlite $W/big.nsys-rep | tee -a $log
used=$(du -cb $OUT/big.sqlite.xz.part* | tail -1 | cut -f1); rep=$(stat -c %s $W/big.nsys-rep)
if [ $((used + rep)) -lt $((60 * 1024 * 1024)) ]; then split -b 15M -d -a 1 $W/big.nsys-rep $OUT/big.nsys-rep.part; fi
ls -l $OUT | tee -a $log

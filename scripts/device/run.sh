#!/bin/bash
# On the accelerator host: install the carried wheels, start an embedded PostgreSQL 18, run the lab's
# gpu and cpu-bound experiments (issue 29), write what they measured under $OUT:
#   $OUT/lab/results/benchmark.csv, $OUT/lab/docs/benchmarks.md   (the lab's own files)
#   $OUT/results.json                                             (the same rows as JSON)
#   $OUT/run.log, $OUT/workers/                                   (the run's lines; worker logs on failure)
# Called as: OUT=/some/dir bash .device/run.sh       QUICK=1: the lab's --quick sizes (a trial run)
# ONLY="gpu" or ONLY="cpu-bound": one experiment.   PYTHON=python3.12: another interpreter.
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:?set OUT to a folder for the results}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
T0=$(date +%s)
SITE=${SITE:-/tmp/pgwork-site}
if [ -d "$HERE/whl" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$HERE"/whl/*.whl 2>&1 | tail -2
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH} PATH=$SITE/bin:$PATH
fi
export PYTHONUNBUFFERED=1 PGWORK_LOG_LEVEL=${PGWORK_LOG_LEVEL:-WARNING} PGWORK_LAB_LOGS=$OUT/workers
$PY - <<'PYEOF' || exit 3
import importlib, sys
import pgwork
print("pgwork", pgwork.__version__, "from", pgwork.__file__, "python", sys.version.split()[0])
for name in ("numpy", "torch"):
    try:
        m = importlib.import_module(name)
        extra = f", CUDA {m.cuda.is_available()} {m.cuda.get_device_name(0) if m.cuda.is_available() else ''}" if name == "torch" else ""
        print(name, m.__version__ + extra)
    except Exception as exc:
        print(name, "not importable:", exc)
PYEOF
# The embedded server lives as long as this script: its holder process is stopped on exit.
DSNFILE=$(mktemp -u /tmp/pgwork-admin-dsn.XXXXXX)
$PY -c "
import os, sys, time, pgwork.embedded as e
s = e.start()
open(sys.argv[1] + '.tmp', 'w').write(e.admin_dsn(s)); os.rename(sys.argv[1] + '.tmp', sys.argv[1])
time.sleep(3600)
" "$DSNFILE" > "$OUT/embedded.log" 2>&1 &
HOLDER=$!
trap 'kill $HOLDER 2>/dev/null; rm -f "$DSNFILE"' EXIT
for _ in $(seq 1 120); do [ -f "$DSNFILE" ] && break; sleep 0.5; done
ADMIN=$(cat "$DSNFILE" 2>/dev/null) || { echo "embedded PostgreSQL did not start:"; cat "$OUT/embedded.log"; exit 3; }
echo "== embedded PostgreSQL up t=$(( $(date +%s) - T0 ))s"
FLAGS=(--dsn "$ADMIN" --out "$OUT/lab" --no-plots)
[ -n "${QUICK:-}" ] && FLAGS+=(--quick)
RC=0
for exp in ${ONLY:-gpu cpu-bound}; do
  echo "== $exp t=$(( $(date +%s) - T0 ))s"
  timeout "${EXPERIMENT_SECONDS:-280}" $PY -m pgwork.cli bench --only "$exp" "${FLAGS[@]}" 2>&1 | grep -v "INFO pgwork.db: applied" || RC=1
done
$PY - "$OUT" <<'PYEOF'
import csv, json, sys, pathlib
out = pathlib.Path(sys.argv[1])
path = out / "lab/results/benchmark.csv"
rows = list(csv.DictReader(path.open())) if path.exists() else []
json.dump(rows, (out / "results.json").open("w"), indent=1)
print(f"{len(rows)} rows -> {out / 'results.json'}")
PYEOF
echo "== end t=$(( $(date +%s) - T0 ))s rc=$RC"
exit $RC

#!/bin/bash
# The largest job the demo absorbs (docs/BENCHMARKS.md, "Overload"; issue 11): `suanli up --headless`, one
# best-effort job of N one-core 60 s tasks 35 s into the run, its state polled every 7 s for 84 s, then
# cancelled and a probe job submitted 5 s later. Prints the LOST transitions metering logged and the
# tasks the fleet stopped as superseded, and the run's own verdict. Not a test: run it on an idle machine.
#
#     bash bench/overload_demo.sh 1000 [HOME]       # HOME defaults to /tmp/suanli-overload-N
set -euo pipefail
N=${1:?usage: bench/overload_demo.sh N [HOME]}
H=${2:-/tmp/suanli-overload-$N}
cd "$(dirname "$0")/.."
rm -rf "$H" && mkdir -p "$H"
.venv/bin/suanli up --headless --duration 200 --home "$H/up" --no-context > "$H/up.log" 2>&1 &
UP=$!
until grep -q "waiting for" "$H/up.log" 2>/dev/null; do sleep 1; done
sleep 35
export SUANLI_CONFIG=$H/up/config.yaml
printf '{name: big, queue: initech, best_effort: true, tasks: [{name: t, replicas: %s, resources: {cpu: "1", memory: 1Gi}, duration: 60s}]}\n' "$N" > "$H/big.yaml"
JOB=$(.venv/bin/suanli job submit "$H/big.yaml" | awk '{print $2}')
echo "submitted $JOB ($N tasks)"
for _ in $(seq 12); do
  sleep 7
  .venv/bin/suanli job get "$JOB" -o json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j.get("state"), j.get("reason", ""))' || true
done
.venv/bin/suanli job cancel "$JOB" || true
sleep 5
.venv/bin/suanli job submit examples/jobs/cpu-batch.yaml
wait $UP || true
echo "READY -> LOST lines in metering.log: $(grep -c 'READY -> LOST' "$H/up/logs/metering.log" || true)"
echo "superseded stops in fleet.log: $(grep -c superseded "$H/up/logs/fleet.log" || true)"
tail -3 "$H/up.log"

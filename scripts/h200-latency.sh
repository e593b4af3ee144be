#!/usr/bin/env bash
# The latency proof on a GPU machine without Docker or systemd (the device tool's H200):
# tritonserver from the nvidia-pytriton 0.7.0 wheel (stripped: .whl/tritonserver-min.zip),
# a Python-backend ResNet-50 in FP16 on the GPU (2 instances), then through an inventory
# host with ansible_connection: local:
#   invoke bench (no dynamic batching vs the deployed 800 µs window, batch 1/2/4/8),
#   invoke bench with client micro-batching, invoke tune-window for a p95 target,
#   and the checklist's latency line.  Results (<= 8 files) go to $OUT.
#   Each bench point is the median and min-max of REPEATS windows (default 3; at most MAXW, default 4), unstable
#   said; tune-window breaks ties within the spread to the shorter window and measures its choice again.
#   (Three windows a point: the full sweep takes about three times the one-window run; QUICK=1 stays short.)
#   MODE=follow instead runs the continuous window tuner (invoke tune-window --follow) on live load:
#   a steady closed-loop load (invoke bench, one long point) while the tuner steps the window, first
#   for a target the load meets, then for one it cannot.
# Usage: OUT=/some/dir bash scripts/h200-latency.sh   (run from the repository root)
set -uo pipefail
OUT=${OUT:?set OUT}
QUICK=${QUICK:-0}           # 1: a short smoke run
STUB_PY=${STUB_PY:-3.12}   # the backend stub's Python (the device's python3)
MODEL_PY=${MODEL_PY:-scripts/h200/resnet50_model.py}
MODE=${MODE:-sweep}         # sweep | follow
KIND=${KIND:-KIND_GPU}
REPO=$PWD
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
exec > >(tee "$OUT/run.log") 2>&1

log "python: $(python3 --version); GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
if [ "${SKIP_PIP:-0}" != 1 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { log "pip install failed"; exit 1; }
fi
# The model's own imports (torch there, numpy here) come from python3's site-packages.
STUB_SITE=$(python3 -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))')
export PYTHONPATH=/tmp/site:$REPO COLUMNS=160 PYTHONUNBUFFERED=1

W=/tmp/trt
rm -rf $W && mkdir -p $W
python3 -m zipfile -e ${TRITON_ZIP:-.whl/tritonserver-min.zip} $W || exit 1
TS=$W/pytriton/tritonserver
chmod +x $TS/bin/tritonserver $TS/python_backend_stubs/$STUB_PY/triton_python_backend_stub
cp $TS/python_backend_stubs/$STUB_PY/triton_python_backend_stub $TS/backends/python/
ldd $TS/backends/python/triton_python_backend_stub | grep -i "python\|not found"

# The model repository: the triton role's l40s profile (preferred 2/4/8/16, 800 µs, 2 instances per GPU).
R=$W/models/resnet50
mkdir -p $R/1 && cp $MODEL_PY $R/1/model.py
cat > $R/config.pbtxt <<PB
name: "resnet50"
backend: "python"
max_batch_size: 16
input [{name: "input", data_type: TYPE_FP16, dims: [3, 224, 224]}]
output [{name: "logits", data_type: TYPE_FP16, dims: [1000]}]
instance_group [{count: 2, kind: $KIND}]
dynamic_batching { preferred_batch_size: [2, 4, 8, 16] max_queue_delay_microseconds: 800 }
PB

# An inventory host reached with ansible_connection: local.
mkdir -p $W/work && cd $W/work
cat > hosts <<'INV'
all:
  hosts:
    h200-01:
      ansible_connection: local
      ansible_host: 127.0.0.1
      gpu_profile: cpu
      latency_slo_p95_ms: 50
      triton_ports: {http: 8000, grpc: 8001, metrics: 8002}
      triton_models:
        resnet50:
          backend: python
          max_batch_size: 16
          input: [{name: input, data_type: TYPE_FP16, dims: [3, 224, 224]}]
          output: [{name: logits, data_type: TYPE_FP16, dims: [1000]}]
INV

if [ "$KIND" = KIND_GPU ]; then
  log "for scale: the same model in-process in PyTorch (FP16, channels_last)"
  python3 - <<'PY'
import time, torch, torchvision
torch.backends.cudnn.benchmark = True
m = torchvision.models.resnet50(weights=None).eval().half().cuda().to(memory_format=torch.channels_last)
with torch.inference_mode():
    for b in (1, 16):
        x = torch.randn(b, 3, 224, 224, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
        for _ in range(20): m(x)
        torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(100): m(x)
        torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 100
        print(f"in-process batch {b}: {dt*1e3:.2f} ms, {b/dt:.0f} images/s")
PY
fi
log "starting tritonserver"
LD_LIBRARY_PATH=$W/nvidia_pytriton.libs PYTHONPATH=$STUB_SITE setsid $TS/bin/tritonserver \
  --model-repository=$W/models --backend-directory=$TS/backends --model-control-mode=explicit --load-model='*' \
  --backend-config=python,shm-default-byte-size=33554432 --metrics-config=summary_latencies=true --http-port=8000 --grpc-port=8001 --metrics-port=8002 \
  > $W/tritonserver.log 2>&1 &
TPID=$!
for i in $(seq 1 240); do
  curl -sf localhost:8000/v2/health/ready >/dev/null 2>&1 && break
  kill -0 $TPID 2>/dev/null || break
  sleep 0.5
done
if ! curl -sf localhost:8000/v2/models/resnet50/ready >/dev/null 2>&1; then
  log "tritonserver not ready"; tail -40 $W/tritonserver.log; exit 1
fi
log "tritonserver ready"

B="python3 -m invoke --search-root $REPO"
RP="--repeats ${REPEATS:-3} --max-windows ${MAXW:-4}"
if [ "$MODE" = follow ]; then
  FT1=${FT1:-50}; FT2=${FT2:-12}; FSEC=${FSEC:-100}
  log "follow: steady load (batch 1, concurrency 64, 8 client processes) for $((2 * FSEC + 40)) s"
  $B bench --host h200-01 --batch 1 --concurrency 64 --warmup 2 --duration $((2 * FSEC + 30)) --processes 8 \
    --repeats 1 --no-plot --out $W/load > $W/load.log 2>&1 &
  LPID=$!
  sleep 12
  log "tune-window --follow: target p95 $FT1 ms for $FSEC s"
  $B tune-window --host h200-01 --follow --target-p95-ms $FT1 --interval 10 --for $FSEC --record $W/bringup/triton-window.json
  log "tune-window --follow: target p95 $FT2 ms for $FSEC s"
  $B tune-window --host h200-01 --follow --target-p95-ms $FT2 --interval 10 --for $FSEC --record $W/bringup/triton-window.json
  wait $LPID; tail -25 $W/load.log
  kill $TPID; wait $TPID 2>/dev/null
  grep -E "^E|error" $W/tritonserver.log | grep -v "NVML\|DCGM\|CudaDriverHelper" | tail -5
  L=($(ls -tr reports/bench/h200-01-window-*.jsonl))
  cp ${L[0]} $OUT/follow-1.jsonl; cp ${L[0]%.jsonl}.png $OUT/follow-1.png
  cp ${L[1]} $OUT/follow-2.jsonl; cp ${L[1]%.jsonl}.png $OUT/follow-2.png
  cp $(ls -t $W/load/h200-01-*.json | head -1) $OUT/follow-load.json
  cp $W/bringup/triton-window.json $OUT/
  log "done"
  exit 0
fi
if [ "$QUICK" = 1 ]; then
  SWEEP="--batch 1,8 --concurrency 1,16"; D="--warmup 1 --duration 2"; CONC_T=16
else
  SWEEP="--batch 1,2,4,8 --concurrency 1,4,16,64"; D="--warmup 1 --duration 4"; CONC_T=64
fi
log "bench: client micro-batching (600 µs, up to 16) on top of the deployed window"
$B bench --host h200-01 --batch 1 --concurrency 16,64 --microbatch-us 600 --microbatch-max 16 $D $RP --processes 8
log "bench: no dynamic batching vs the deployed 800 µs window (the newest result: the checklist's)"
$B bench --host h200-01 --window-us none,deployed $SWEEP $D $RP --processes 8
log "tune-window: target p95 50 ms at batch 1 x concurrency $CONC_T"
$B tune-window --host h200-01 --target-p95-ms 50 --windows 200,400,800,1200 --concurrency $CONC_T $D $RP --processes 8

log "checklist latency line"
python3 - <<'PY' | tee checklist-latency.md
import yaml
from bringup.checklist.pages import latency_checks, render_markdown
v = yaml.safe_load(open("hosts"))["all"]["hosts"]["h200-01"]
v["inventory_hostname"] = "h200-01"
print(render_markdown("h200-01 (latency line only)", latency_checks(v)))
PY
kill $TPID; wait $TPID 2>/dev/null
grep -E "^E|error" $W/tritonserver.log | grep -v "NVML\|DCGM\|CudaDriverHelper" | tail -5
ls reports/bench
# Bring back: the two benches' JSON and PNG, the tuner's JSON and PNG, the checklist line, this log (<= 8 files).
J=($(ls -t reports/bench/h200-01-2*.json)); T=($(ls -t reports/bench/h200-01-tune-*.json))
cp ${J[0]} $OUT/bench-window.json; cp ${J[0]%.json}.png $OUT/bench-window.png
cp ${J[1]} $OUT/bench-microbatch.json; cp ${J[1]%.json}.png $OUT/bench-microbatch.png
cp ${T[0]} $OUT/tune-window.json; cp ${T[0]%.json}.png $OUT/tune-window.png
cp checklist-latency.md $OUT/
log "done"

#!/usr/bin/env bash
# Measured acceptance (issue 31 part 2) of THIS machine through `ansible_connection: local`: the probe alone
# (probe.json: the raw measurement, even if the task wiring failed), then `invoke accept` (its pages and saved
# result), then the rack checklist, which shows the newest saved acceptance result.  It changes no accelerator
# setting: the probe only copies memory and reads nvidia-smi; snapshots of the GPU settings taken before and
# after prove it (unchanged.diff).
#
#   scripts/h200-accept.sh OUTDIR [HOSTNAME] [SECONDS]
#   SECONDS: the load's duration (default 10).  DCGM: level 1 where dcgmi exists (absent on the H200 VM: one WARN).
#   FORCE=1 passes --force (a process on the GPU while Triton's metrics port is silent refuses the run otherwise).
set -u
out=$(mkdir -p "$1" && cd "$1" && pwd)
name=${2:-$(hostname)}
secs=${3:-10}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
cd "$work" || exit 1
printf 'all:\n  hosts:\n    %s:\n      ansible_connection: local\n      gpu_profile: auto\n' "$name" > hosts
snapshot() {
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,pci.bus_id,persistence_mode,mig.mode.current,ecc.mode.current,compute_mode,clocks.applications.graphics,clocks.applications.memory,power.limit --format=csv
  fi > "$1" 2>&1
}
inv() { python3 -m invoke --search-root "$repo" "$@"; }
snapshot before.txt
timeout -k 5 300 python3 "$repo/bringup/acceptance/probe.py" --seconds "$secs" > probe.json 2> probe.err
echo "probe alone: exit $?"
inv accept --host "$name" --seconds "$secs" --out reports/accept --prometheus "$work/accept.prom" ${FORCE:+--force} \
  > accept.txt 2>&1
echo "accept: exit $? (0 pass, 2 a FAIL, 1 refused or bad input)"
inv checklist --host "$name" --roles sysctl --out checklist > checklist.txt 2>&1; echo "checklist: exit $?"
snapshot after.txt
if diff before.txt after.txt > unchanged.diff; then echo "GPU settings unchanged: before/after snapshots identical"
else echo "GPU SETTINGS DIFFER (see unchanged.diff)"; fi
cp reports/accept/"$name".md "$out/accept.md" 2>/dev/null
cp reports/accept/"$name".html "$out/accept.html" 2>/dev/null
cp reports/accept/"$name".json "$out/accept.json" 2>/dev/null
cp reports/accept/"$name"-*.json "$out/" 2>/dev/null
cp checklist/"$name".md "$out/checklist.md" 2>/dev/null
cp probe.json probe.err accept.txt accept.prom checklist.txt before.txt unchanged.diff "$out/" 2>/dev/null
tar czf "$out/run.tar.gz" .
echo "results: $out"

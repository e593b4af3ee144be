#!/usr/bin/env bash
# Issue 31 on the device tool's H200 (no sshd, no systemd, no Docker; never changes accelerator settings):
# the read-only bring-up report with the new health lines (scripts/readonly-local.sh), the raw facts, and
# the raw outputs the health and driver facts read (nvidia-smi nvlink -s, the kernel log's Xid lines, the
# RDMA ports, who owns the loaded driver), all into one tarball under $OUT (the device returns 8 files).
# Usage: bash scripts/h200-wheels.sh here (wheels into .whl/), then on the device, carrying .whl:
#   OUT=$OUT bash scripts/h200-health.sh
set -u
OUT=${OUT:?set OUT}
W=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  || echo "pip install failed"
export PYTHONPATH=/tmp/site:$PWD COLUMNS=160
bash scripts/readonly-local.sh "$W/readonly" h200-vm auto > "$W/readonly.log" 2>&1
cd "$W" || exit 1
printf 'all:\n  hosts:\n    h200-vm:\n      ansible_connection: local\n      gpu_profile: auto\n' > hosts
python3 -m invoke --search-root "$OLDPWD" facts --host h200-vm --raw > facts-raw.json 2> facts-raw.err
run() { echo "\$ $*"; "$@"; echo "[exit $?]"; }
{ run nvidia-smi nvlink -s; run nvidia-smi nvlink -c; run nvidia-smi -q -d ECC,PERFORMANCE,TEMPERATURE; } \
  > nvidia-smi-health.txt 2>&1
{ run sh -c 'dmesg | grep -c "NVRM: Xid"'; run sh -c 'dmesg | grep "NVRM" | tail -n 20'; run sh -c 'dmesg | head -n 2';
  run ls -la /sys/class/infiniband; } > kernel-ib.txt 2>&1
{ run cat /proc/driver/nvidia/version; run modinfo -F filename nvidia; run sh -c 'dpkg -S "$(command -v nvidia-smi)"';
  run sh -c 'ls -la /usr/bin/nvidia-uninstall /var/log/nvidia-installer.log'; run sh -c 'dpkg -l | grep -i nvidia';
  run uname -r; run sh -c 'ls /usr/src | head'; run sh -c 'ls -d /sys/bus/pci/devices/*/ | wc -l';
  run sh -c 'for d in /sys/bus/pci/devices/*; do echo "$d $(cat $d/vendor) $(cat $d/class)"; done'; } > driver-origin.txt 2>&1
tar czf "$OUT/h200-health.tar.gz" .
cp readonly/checklist.md readonly.log facts-raw.json nvidia-smi-health.txt kernel-ib.txt driver-origin.txt "$OUT/" 2>/dev/null
ls -la "$OUT"

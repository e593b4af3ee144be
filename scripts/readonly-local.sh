#!/usr/bin/env bash
# Read-only bring-up report of THIS machine through `ansible_connection: local`:
# facts, topology plan, check-mode plan of the roles, checklist (Markdown +
# HTML), and the read-only audit.  Nothing on the host is changed: snapshots
# of sysctls, IRQ affinities and GPU settings taken before and after prove it.
#
#   scripts/readonly-local.sh OUTDIR [HOSTNAME] [GPU_PROFILE] [ROLES]
#   GPU_PROFILE defaults to auto (the class the facts show). DRIVER_BRANCH=580 pins nvidia_driver_branch in the
#   inventory (as an operator would for a host whose driver branch is chosen), else none is pinned: the loaded
#   branch is kept when it runs the Triton image.
set -u
out=$(mkdir -p "$1" && cd "$1" && pwd)
name=${2:-$(hostname)}
profile=${3:-auto}
roles=${4:-sysctl,irq_affinity,cpu_tuning,nvidia_driver,docker,container_toolkit,dcgm_exporter}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
cd "$work" || exit 1
gpus=0
for d in /sys/bus/pci/devices/*; do
  [ "$(cat "$d/vendor")" = 0x10de ] && case $(cat "$d/class") in 0x03*) gpus=$((gpus + 1));; esac
done
printf 'all:\n  hosts:\n    %s:\n      ansible_connection: local\n      gpu_profile: %s\n      gpu_count: %s\n' \
  "$name" "$profile" "$gpus" > hosts
[ -n "${DRIVER_BRANCH:-}" ] && printf '      nvidia_driver_branch: "%s"\n' "$DRIVER_BRANCH" >> hosts
snapshot() {
  { sysctl -a 2>/dev/null | grep -v -e '^fs\.' -e random -e ns_last_pid -e nf_conntrack_count -e 'pty\.nr' \
      -e '^vm\.nr_' -e 'stat_refresh'
    for f in /proc/irq/*/smp_affinity_list; do printf '%s %s\n' "$f" "$(cat "$f" 2>/dev/null)"; done
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=index,persistence_mode,mig.mode.current,ecc.mode.current,clocks.applications.graphics,power.limit --format=csv
    fi
    ls -la /etc/sysctl.d /etc/systemd/system /etc/default/grub.d 2>/dev/null
  } > "$1"
}
inv() { python3 -m invoke --search-root "$repo" "$@"; }
snapshot before.txt
inv facts --host "$name" > facts.json 2> facts.err; echo "facts: exit $?"
inv topology --host "$name" > topology.txt 2>&1; echo "topology: exit $?"
inv topology --host "$name" --json > topology.json 2>&1
inv plan --host "$name" --roles "$roles" > plan.txt 2>&1; echo "plan (check mode): exit $?"
inv checklist --host "$name" --roles "$roles" --out checklist > checklist.txt 2>&1; echo "checklist: exit $?"
inv audit --host "$name" --roles "$roles" > audit.txt 2>&1; echo "audit (check mode): exit $?"
snapshot after.txt
if diff before.txt after.txt > unchanged.diff; then echo "host unchanged: before/after snapshots identical"
else echo "SNAPSHOTS DIFFER (see unchanged.diff)"; fi
cp checklist/"$name".html "$out/checklist.html" 2>/dev/null
cp checklist/"$name".md "$out/checklist.md" 2>/dev/null
cp checklist/"$name".json "$out/checklist.json" 2>/dev/null
cp facts.json topology.txt topology.json plan.txt audit.txt checklist.txt unchanged.diff "$out/" 2>/dev/null
tar czf "$out/run.tar.gz" .
echo "results: $out"
